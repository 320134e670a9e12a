"""Hostile inputs to pydial.stan: wrong argument types, levels, and a posterior of other data.

Each test reproduces a class of failure: the error is typed (a ``DialError``) and names
what to change.
"""

from __future__ import annotations

import dataclasses

import json

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.exceptions import ArgumentError, ArgumentTypeError, EstimandMismatchError
from pydial.stan import compare_intervals, interval_settings, posterior
from pydial.stan import idata as azio
from pydial.stan.bayes import result_estimand
from pydial.stan.schema import data_fingerprint, standata


def _data(seed: int) -> pydial.Comparisons:
    return pydial.simulate(N=4, K=2, rank=1, n_llm=600, n_human=300, seed=seed).comparisons


@pytest.fixture(scope="module")
def data_a():
    return _data(1)


@pytest.fixture(scope="module")
def data_b():
    return _data(2)


# --------------------------------------------------------------------------- argument types
def test_posterior_of_a_dataframe_says_to_build_comparisons(data_a):
    frame = pydial.simulate(N=4, K=2, rank=1, n_llm=60, n_human=30, seed=1).frame
    with pytest.raises(ArgumentTypeError, match=r"Comparisons\.from_frame"):
        posterior(frame, "human")
    with pytest.raises(ArgumentTypeError, match=r"Comparisons\.from_frame"):
        standata(frame)
    with pytest.raises(ArgumentTypeError, match="must be a pydial.Comparisons"):
        posterior({"items": []}, "human")


@pytest.mark.parametrize("like", ["dial-ada", "human"])
def test_posterior_like_a_method_name_points_to_method(data_a, like):
    with pytest.raises(ArgumentTypeError, match=rf"like= takes a fit result.*method='{like}'"):
        posterior(data_a, like=like)


def test_posterior_like_anything_else_is_refused(data_a):
    with pytest.raises(ArgumentTypeError, match="like= takes a fit result.*int"):
        posterior(data_a, like=3)
    with pytest.raises(ArgumentTypeError, match="spec="):
        posterior(data_a, like=pydial.ModelSpec(method="human"))


# --------------------------------------------------------------------------- levels
@pytest.mark.parametrize("level,error", [(1.5, ArgumentError), (0.0, ArgumentError), (float("nan"), ArgumentError),
                                         ("0.9", ArgumentTypeError), (True, ArgumentTypeError),
                                         (None, ArgumentTypeError)])
def test_interval_settings_level_is_checked_by_check_level(level, error):
    with pytest.raises(error, match="level"):
        interval_settings(level)


def test_interval_settings_accepts_a_level():
    with interval_settings(0.9):
        pass


# --------------------------------------------------------------------------- data fingerprint
def test_data_fingerprint_is_the_cells_not_the_row_order(data_a, data_b):
    assert data_fingerprint(data_a) != data_fingerprint(data_b)
    assert tuple(data_a.items) == tuple(data_b.items)
    frame = pydial.simulate(N=4, K=2, rank=1, n_llm=600, n_human=300, seed=1).frame
    shuffled = frame.sample(frac=1.0, random_state=0)
    again = pydial.Comparisons.from_frame(shuffled, human_judge="human")
    assert data_fingerprint(again) == data_fingerprint(data_a)


def _posterior_of(data: pydial.Comparisons, res: object) -> object:
    """A posterior record of ``res``'s estimator sampled (here: made up) on ``data``."""
    rng = np.random.default_rng(0)
    items = list(data.items)
    draws = rng.normal(size=(2, 50, len(items)))
    est = dataclasses.replace(result_estimand(res), data=data_fingerprint(data))
    return azio.build({"posterior": {"s_H": draws}}, coords={"item": items}, dims={"s_H": ["item"]},
                      attrs={"estimand": json.dumps(est.to_record())})


def test_estimand_differences_name_the_data(data_a, data_b):
    res = pydial.fit(data_a, "human")
    fe = result_estimand(res)
    assert fe.data == data_fingerprint(data_a)
    assert fe.differences(dataclasses.replace(fe, data=data_fingerprint(data_b))) == {
        "data": (data_fingerprint(data_a), data_fingerprint(data_b))}
    assert fe.differences(dataclasses.replace(fe, data=None)) == {}  # a record without a fingerprint: not checked on it


@pytest.mark.parametrize("match", [False, True])
def test_compare_intervals_refuses_a_posterior_of_other_data(data_a, data_b, match):
    res_b = pydial.fit(data_b, "human")
    idata_a = _posterior_of(data_a, res_b)
    with pytest.raises(EstimandMismatchError, match="other data") as err:
        compare_intervals(res_b, idata_a, match=match)
    assert set(err.value.mismatch) == {"data"}
    tab = compare_intervals(pydial.fit(data_a, "human"), idata_a)
    assert isinstance(tab, pd.DataFrame) and len(tab) == data_a.N


def test_sampled_posterior_of_other_data_is_refused(stan_backend_name, data_a, data_b):
    """End to end: pydial.posterior records the fingerprint of the data it sampled."""
    res_a = pydial.fit(data_a, "human")
    idata = posterior(data_a, like=res_a, chains=2, draws=200, warmup=200, seed=1)
    assert json.loads(azio.posterior_attrs(idata)["estimand"])["data"] == data_fingerprint(data_a)
    compare_intervals(res_a, idata)
    with pytest.raises(EstimandMismatchError, match="other data"):
        compare_intervals(pydial.fit(data_b, "human"), idata)


@pytest.mark.parametrize("kw,error", [({"adapt_delta": 1.5}, ArgumentError), ({"adapt_delta": "0.8"}, ArgumentTypeError),
                                      ({"chains": 2.0}, ArgumentTypeError), ({"warmup": -1}, ArgumentError)])
def test_compiled_sample_arguments_use_the_shared_validators(models, kw, error):
    with pytest.raises(error, match=next(iter(kw))):
        models["judges"].sample({}, **kw)
