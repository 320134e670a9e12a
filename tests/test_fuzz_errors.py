"""Errors a user can cause through the Python API are typed and say what to change.

Unknown item, judge and covariate names, unknown keywords, a DataFrame where a
:class:`~pydial.Comparisons` is needed, data of another fit, a misnamed human judge and
a write error inside an output folder.
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial import Comparisons
from pydial.exceptions import (ArgumentError, ArgumentTypeError, DataError, DialError, OutputError,
                               UnknownNameError)
from pydial.model.identifiability import check_design
from pydial.outputs import output_dir


def _frame(seed: int = 0, n: int = 400, N: int = 5) -> pd.DataFrame:
    """Two judges and people on random pairs, both display orders, with a ``length`` covariate."""
    rng = np.random.default_rng(seed)
    s = np.linspace(-1, 1, N)
    rows = []
    for r in range(n):
        a, c = rng.choice(N, 2, replace=False)
        la, lb = rng.gamma(4, 50, size=2)
        for k, b in (("j1", 0.4), ("j2", -0.3), ("human", 0.0)):
            first = "a" if rng.random() < 0.5 else "b"
            eta = s[a] - s[c] + b * (1 if first == "a" else -1) + (0.8 if k == "j1" else 0.1) * (la - lb) / 100
            rows.append(dict(record_id=r, judge=k, item_a=f"m{a}", item_b=f"m{c}", first=first,
                             winner="a" if rng.random() < 1 / (1 + np.exp(-eta)) else "b", length_a=la, length_b=lb))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return _frame()


@pytest.fixture(scope="module")
def data(frame) -> Comparisons:
    return Comparisons.from_frame(frame)


@pytest.fixture(scope="module")
def ada(data) -> pydial.DialResult:
    return pydial.fit(data, "dial-ada", rank=0)


@pytest.fixture(scope="module")
def with_covariates(frame) -> pydial.DialResult:
    return pydial.fit(Comparisons.from_frame(frame, covariates=["length"]), "judges")


# ------------------------------------------------------------------ unknown names
def test_unknown_name_error_is_a_lookup_and_an_argument_error():
    e = UnknownNameError("item_i: unknown item 'x'")
    assert isinstance(e, KeyError) and isinstance(e, ArgumentError) and isinstance(e, ValueError)
    assert isinstance(e, DialError) and str(e) == "item_i: unknown item 'x'"  # not quoted, as KeyError's would be


@pytest.mark.parametrize("args, argument, unknown", [(("zz", "m1"), "item_i", "'zz'"), (("m1", "M2"), "item_j", "'M2'")])
def test_contrast_unknown_item(ada, args, argument, unknown):
    with pytest.raises(UnknownNameError) as e:
        ada.contrast(*args)
    msg = str(e.value)
    assert msg.startswith(f"{argument}: unknown item {unknown}") and "'m0', 'm1', 'm2', 'm3', 'm4'" in msg
    if unknown == "'M2'":
        assert "did you mean 'm2'" in msg


def test_contrast_number_for_a_name(ada):
    """Names are text: ``1`` is not the item ``'1'``; the message points at the text."""
    res = pydial.fit(Comparisons.from_frame(_frame().replace({"item_a": {"m1": "1"}, "item_b": {"m1": "1"}})),
                     "human")
    with pytest.raises(UnknownNameError, match=r"unknown item 1 \(did you mean '1'\?\)"):
        res.contrast(1, "m0")


def test_position_test_unknown_judge(ada):
    with pytest.raises(UnknownNameError) as e:
        ada.position_test("j1", "j3")
    assert str(e.value).startswith("judge_2: unknown judge 'j3'") and "'j1', 'j2'" in str(e.value)
    assert ada.position_test("j1", "j2")["p_value"] >= 0


def test_covariate_test_unknown_names(with_covariates):
    res = with_covariates
    with pytest.raises(UnknownNameError, match=r"^judge: unknown judge 'j9'.*'j1', 'j2'"):
        res.covariate_test("j9")
    with pytest.raises(UnknownNameError, match=r"^against: no covariate effects for 'human'"):
        res.covariate_test("j1", against="human")  # a judge of the data without a row in this fit
    with pytest.raises(UnknownNameError, match=r"^covariates: unknown covariate 'lenght' \(did you mean 'length'\?\)"):
        res.covariate_test("j1", covariates=["lenght"])
    with pytest.raises(ArgumentTypeError, match=r"covariates must be a list of names.*pass \['length'\]"):
        res.covariate_test("j1", covariates="length")  # not the letters of 'length'
    assert res.covariate_test("j1", covariates=["length"])["df"] == 1


# ------------------------------------------------------------------ keywords and types
def test_spec_replace_unknown_keyword(ada):
    with pytest.raises(ArgumentTypeError) as e:
        ada.spec.replace(rnak=2)
    assert isinstance(e.value, TypeError) and isinstance(e.value, ArgumentError)
    assert "'rnak'" in str(e.value) and "method, rank, calibration" in str(e.value)
    assert ada.spec.replace(level=0.9).level == 0.9


@pytest.mark.parametrize("call", ["loo_cv", "check_design", "fit"])
def test_dataframe_for_comparisons(ada, frame, call):
    run = {"loo_cv": lambda: ada.loo_cv(frame), "check_design": lambda: check_design(frame),
           "fit": lambda: pydial.fit(frame, "human")}[call]
    with pytest.raises(ArgumentTypeError, match=r"data must be a pydial.Comparisons, got DataFrame; build it from "
                                                r"the long table with pydial.Comparisons.from_frame\(df\)"):
        run()


def test_loo_cv_on_other_data(ada, data, frame):
    fewer_items = Comparisons.from_frame(frame[(frame.item_a != "m4") & (frame.item_b != "m4")])
    with pytest.raises(ArgumentError, match=r"^data: loo_cv refits on the data of this fit.*the items"):
        ada.loo_cv(fewer_items)
    fewer_judges = data.subset(judges=["j1"])
    with pytest.raises(ArgumentError, match=r"the judges \['j1'\], the fit \['j1', 'j2'\]"):
        ada.loo_cv(fewer_judges)
    half = Comparisons.from_frame(frame[frame.record_id < 200])
    with pytest.raises(ArgumentError, match="other judgments"):
        ada.loo_cv(half)


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(penalty="ridge"), ArgumentError, "penalty must be one of"),
    (dict(seed="a"), ArgumentTypeError, "seed must be None, a numpy.random.Generator or a non-negative integer"),
    (dict(seed=-1), ArgumentError, r"seed must be in \[0, 2\*\*32\)"),
    (dict(shared="yes"), ArgumentTypeError, "shared must be True or False"),
    (dict(W="abc"), ArgumentTypeError, "W must be a numeric array"),
])
def test_check_design_arguments(data, kwargs, error, text):
    with pytest.raises(error, match=text):
        check_design(data, rank=0, **kwargs)


# ------------------------------------------------------------------ a misnamed human judge
def test_misnamed_human_judge_named_with_the_judges_found(frame):
    df = frame.copy()
    df.loc[df.judge == "human", "first"] = None  # the people's rows need no display order
    assert Comparisons.from_frame(df).n_human > 0
    with pytest.raises(DataError) as e:
        Comparisons.from_frame(df, human_judge="people")
    msg = str(e.value)
    assert msg.startswith("no rows have judge 'people', the human judge (human_judge= / --human)")
    assert "the judges found are 'j1', 'j2', 'human'" in msg and "Missing values in column 'first'" in msg


def test_missing_first_with_the_human_judge_present(frame):
    """With the human judge there, a missing display order of an LLM judge is reported as before."""
    df = frame.copy()
    df.loc[0, "first"] = None
    with pytest.raises(DataError, match=r"^missing values in column 'first' at rows \[0\]"):
        Comparisons.from_frame(df)


# ------------------------------------------------------------------ writing outputs
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("named", [False, True])
def test_write_error_in_output_folder_names_the_output(tmp_path, code, named):
    out = tmp_path / "results"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputError) as e:
        with output_dir(out, force=True) as tmp:
            raise OSError(code, os.strerror(code), *([str(tmp / "scores.csv")] if named else []))
    msg = str(e.value)
    assert msg == f"cannot write {out / 'scores.csv' if named else out}: {os.strerror(code)}"
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["results"]  # no temporary left


def test_other_errors_in_an_output_folder_pass_through(tmp_path):
    with pytest.raises(FileNotFoundError):
        with output_dir(tmp_path / "o"):
            open(tmp_path / "no-such-input.csv")
