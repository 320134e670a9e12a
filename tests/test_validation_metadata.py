"""Arguments checked up front with typed errors, and result metadata that says what
was estimated (rank, calibration and lambda only where the method has them,
covariance settings in the summary, covariances as labelled tables)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.cache import entries
import pydial.api
import pydial.estimation.estimators as estimators
from pydial.cli import main
from pydial.exceptions import ArgumentWarning, ConvergenceError, DialError, IdentifiabilityError
from pydial.inference.linearization import Linearization


@pytest.fixture(scope="module")
def data() -> pydial.Comparisons:
    return pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=300, seed=5).comparisons


# ------------------------------------------------------------------ cache of derived results
def test_replaced_copy_starts_with_its_own_empty_cache(data):
    pydial.fit(data, "human")
    assert any(key[0] == "check_design" for key in entries(data))
    h = data.human
    one_pair = (h.i == h.i[0]) & (h.j == h.j[0])
    copy = dataclasses.replace(data, human=dataclasses.replace(h, **{f: getattr(h, f)[one_pair] for f in "ijny"}))
    assert entries(copy) == ()
    # the design check of the copy is made on the copy (one human pair: not connected) ...
    with pytest.raises(IdentifiabilityError):
        pydial.fit(copy, "human")
    assert any(key[0] == "check_design" for key in entries(copy))
    # ... and leaves the original's cached check alone
    assert pydial.fit(data, "human").ok


# ------------------------------------------------------------------ arguments a method ignores
@pytest.mark.parametrize("method, given", [
    ("human", {"rank": 2}), ("judges", {"rank": 1}), ("pooled", {"rank": 1}),
    ("human", {"calibration": "mu"}), ("judges", {"calibration": "W"}), ("pooled", {"calibration": "mu"}),
    ("atc", {"calibration": "mu"}),
])
def test_ignored_argument_warns_naming_argument_and_method(data, method, given):
    (name, value), = given.items()
    with pytest.warns(ArgumentWarning, match=rf"{name}=.*method '{method}'") as rec:
        res = pydial.fit(data, method, **given)
    assert rec[0].filename == __file__  # attributed to the caller's line
    ref = pydial.fit(data, method)
    np.testing.assert_array_equal(res.scores.to_numpy(), ref.scores.to_numpy())


@pytest.mark.parametrize("method, given", [("dial-anc", {"rank": 1, "calibration": "mu"}), ("atc", {"rank": 1}),
                                           ("dial-nopos", {"calibration": "W"}), ("human", {})])
def test_used_or_default_arguments_do_not_warn(data, method, given, recwarn):
    pydial.fit(data, method, **given)
    assert not [w for w in recwarn if issubclass(w.category, ArgumentWarning)]


def test_defaults_are_rank_1_and_mu(data):
    default, explicit = pydial.fit(data, "dial-anc"), pydial.fit(data, "dial-anc", rank=1, calibration="mu")
    np.testing.assert_array_equal(default.scores.to_numpy(), explicit.scores.to_numpy())
    assert (default.rank, default.calibration) == (1, "mu")


def test_method_arguments_keeps_what_the_method_uses():
    assert estimators.method_arguments("human", rank=2, calibration="W") == {}
    assert estimators.method_arguments("atc", rank=2, calibration="W") == {"rank": 2}
    assert estimators.method_arguments("dial-ada", rank=2, calibration="W") == {"rank": 2, "calibration": "W"}


def test_cli_human_fit_does_not_warn_about_default_rank(tmp_path, capsys):
    assert main(["fit", "synthetic", "--method", "human"]) == 0
    assert "ignored" not in capsys.readouterr().err
    assert main(["fit", "synthetic", "--method", "human", "--rank", "2"]) == 0
    assert "rank=2 is ignored: method 'human'" in capsys.readouterr().err


# ------------------------------------------------------------------ numerical failures
@pytest.mark.parametrize("error, expected", [
    (np.linalg.LinAlgError("Singular matrix"), IdentifiabilityError),
    (np.linalg.LinAlgError("SVD did not converge"), ConvergenceError),
    (FloatingPointError("overflow encountered in exp"), ConvergenceError),
])
@pytest.mark.parametrize("method", ["human", "dial-anc"])
def test_numerical_errors_become_dial_errors(data, monkeypatch, method, error, expected):
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(Linearization, "covariance", broken)
    with pytest.raises(expected, match=f"method '{method}' failed") as info:
        pydial.fit(data, method)
    assert isinstance(info.value, DialError) and info.value.__cause__ is error


def test_numerical_error_in_the_design_check(data, monkeypatch):
    import pydial.model.identifiability

    def broken(*args, **kwargs):
        raise FloatingPointError("invalid value")

    copy = dataclasses.replace(data)  # an empty cache: the check runs
    monkeypatch.setattr(pydial.model.identifiability, "check_design", broken)
    with pytest.raises(ConvergenceError, match="design check of method 'human'") as info:
        pydial.fit(copy, "human")
    assert isinstance(info.value.__cause__, FloatingPointError)


def test_numerical_error_in_the_diagnosis(data, monkeypatch):
    def broken(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(pydial.estimation.results, "verdict", broken)
    with pytest.raises(ConvergenceError, match="diagnosis of the 'human' fit") as info:
        pydial.fit(data, "human")
    assert isinstance(info.value.__cause__, np.linalg.LinAlgError)


# ------------------------------------------------------------------ result metadata
@pytest.mark.parametrize("anchored_cov", ["two-step", "fixed-basis"])
def test_summary_names_cov_type_and_anchored_cov(data, anchored_cov):
    anc = pydial.fit(data, "dial-anc", cov_type="binomial", anchored_cov_type=anchored_cov)
    assert anc.anchored_cov == anchored_cov
    assert "cov_type=binomial" in anc.summary() and f"anchored_cov_type={anchored_cov}" in anc.summary()
    human = pydial.fit(data, "human")
    assert "cov_type=fisher" in human.summary() and "anchored_cov" not in human.summary()
    assert human.anchored_cov is None


def test_methods_without_rank_or_calibration_record_none(data):
    for method in ("human", "judges", "pooled"):
        res = pydial.fit(data, method)
        assert res.rank is None and res.calibration is None
        assert "rank=None  calibration=None" in res.summary()
        assert res.dial_model() == (1, "mu")
    atc = pydial.fit(data, "atc", rank=2)
    assert (atc.rank, atc.calibration) == (2, "mu") and atc.dial_model() == (2, "mu")
    assert pydial.fit(data, "dial-anc", rank=2, calibration="W").dial_model() == (2, "W")


def test_judges_report_no_lambda(data):
    res = pydial.fit(data, "judges")
    assert np.isnan(res.lambda_) and "lambda=n/a" in res.summary()
    from pydial.report import summary_dict

    out = summary_dict(res)
    assert out["lambda"] is None and out["lambda_is_infinite"] is False and out["rank"] is None
    assert pydial.fit(data, "human").lambda_ == 0.0


def test_bootstrap_of_methods_without_rank_or_lambda(data):
    for method in ("human", "judges"):
        bt = pydial.fit(data, method).bootstrap(2, seed=1, progress=False)
        dist = bt.lambda_distribution()
        assert dist["count"].sum() == 2 and dist["rank"].isna().all()


def test_plan_from_a_human_pilot_uses_the_default_dial_model(data):
    from pydial.studies.metrics import first_order_risk

    tab = pydial.plan(pydial.fit(data, "human"), budgets=[100, 200])
    cols = ["excess_risk", "ci_width", "contrast_ci_width", "p_topk_correct"]
    assert np.isfinite(tab[cols].to_numpy()).all() and set(tab["method"]) == {"human", "dial-anc", "dial-ada"}
    h = tab[tab["method"] == "human"]
    np.testing.assert_allclose(h["excess_risk"], first_order_risk(h["budget"].to_numpy(), data.N - 1), rtol=1e-12)


def test_atc_summary_has_no_standard_error_columns(data):
    atc = pydial.fit(data, "atc")
    text = atc.summary()
    assert "AtC has no standard errors" in text and "covariance:" not in text
    scores = text.split("Scores (centered")[1].split("Position effects")[0]
    assert "se" not in scores.split() and "ci_low" not in scores and "NaN" not in scores


# ------------------------------------------------------------------ covariances as labelled tables
def test_tables_of_two_fits_concatenate(data):
    one, two = pydial.fit(data, "dial-anc"), pydial.fit(data, "judges", cov_type="binomial")
    for res in (one, two):
        C = res.position_effects_cov
        assert isinstance(C, pd.DataFrame) and list(C.index) == list(C.columns) == list(data.judges)
        assert C.index.name == "judge" and "cov" not in res.position_effects.attrs
        np.testing.assert_allclose(res.position_effects["se"], np.sqrt(np.diag(C)), rtol=1e-12)
        t = res.position_test(data.judges[0], data.judges[2])
        assert t["se"] == pytest.approx(np.sqrt(C.iloc[0, 0] + C.iloc[2, 2] - 2 * C.iloc[0, 2]), rel=1e-12)
    both = pd.concat([one.position_effects, two.position_effects], keys=["dial-anc", "judges"])
    assert both.shape == (2 * data.K, one.position_effects.shape[1])
    assert len(pd.concat([one.consensus, pydial.fit(data, "dial-ada").consensus])) == 2 * data.K
    assert pydial.fit(data, "human").position_effects_cov is None


def test_tie_tables_of_two_fits_concatenate():
    tied = pydial.simulate(N=5, K=2, rank=1, n_llm=3000, n_human=500, tie_rate=0.2, seed=3).comparisons
    fits = [pydial.fit(tied, "dial-anc", ties=t) for t in ("davidson", "rao-kupper")]
    for name in ("position_effects", "consensus", "tie_parameters"):
        assert len(pd.concat([getattr(r, name) for r in fits])) == 2 * len(getattr(fits[0], name))
    assert list(fits[0].position_effects_cov.index) == list(tied.judges)
    atc = pydial.fit(tied, "atc", ties="davidson")
    assert len(pd.concat([fits[0].position_effects, atc.position_effects])) == 2 * tied.K
    assert "anchored_cov_type=two-step" in fits[0].summary()


def test_path_is_typed_and_drives_loo_cv():
    """res.path lists the fitted candidates behind res.gacv (typed entries, not a details dict);
    res.loo_cv refits from them and matches selection.loo_cv called directly."""
    from pydial.estimation.selection import PathEntry, loo_cv

    d = pydial.simulate(N=4, K=3, rank=1, n_llm=1500, n_human=60, seed=2).comparisons
    res = pydial.fit(d, "dial-ada", multiples=[1.0, 4.0])
    assert not hasattr(res, "details")
    assert len(res.path) == len(res.gacv) and all(isinstance(e, PathEntry) for e in res.path)
    np.testing.assert_array_equal([e.candidate.lambda_ for e in res.path], res.gacv["lambda"].to_numpy())
    tab = res.loo_cv(d)
    fin = [e for e in res.path if e.candidate.admissible and 0 < e.candidate.lambda_ < np.inf]
    assert len(fin) > 0
    e = fin[0]
    row = tab.loc[tab["lambda"] == e.candidate.lambda_].iloc[0]
    assert row["cv_loo"] == pytest.approx(loo_cv(d, e.chart, e.candidate.lambda_, e.candidate.theta), rel=1e-12)
    with pytest.raises(ValueError, match="weight path"):
        pydial.fit(d, "dial-anc").loo_cv(d)
