"""Arguments checked up front with typed errors, and result metadata that says what
was estimated (rank, calibration and lambda only where the method has them,
covariance settings in the summary, covariances as labelled tables)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import pydial
import pydial.estimators as estimators
from pydial.cli import main
from pydial.exceptions import ArgumentWarning, ConvergenceError, DialError, IdentifiabilityError


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

    monkeypatch.setattr(estimators, "influence_covariance", broken)
    with pytest.raises(expected, match=f"method '{method}' failed") as info:
        pydial.fit(data, method)
    assert isinstance(info.value, DialError) and info.value.__cause__ is error


def test_numerical_error_in_the_design_check(data, monkeypatch):
    import pydial.design

    def broken(*args, **kwargs):
        raise FloatingPointError("invalid value")

    copy = dataclasses.replace(data)  # an empty cache: the check runs
    monkeypatch.setattr(pydial.design, "check_design", broken)
    with pytest.raises(ConvergenceError, match="design check of method 'human'") as info:
        pydial.fit(copy, "human")
    assert isinstance(info.value.__cause__, FloatingPointError)
