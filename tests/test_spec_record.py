"""The estimand record is the spec: ModelSpec.to_record / from_record, selected, estimand; no Stan needed."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import pydial
from pydial import ArgumentError, ArgumentTypeError, ModelSpec
from pydial.estimation.selection import Selection
from pydial.stan.bayes import result_estimand
from pydial.stan.dial_posterior import Estimand
from pydial.stan.schema import data_fingerprint

INF = float("inf")


@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=5, K=3, rank=1, n_llm=3000, n_human=400, seed=4).comparisons


@pytest.mark.parametrize("spec", [
    ModelSpec(),
    ModelSpec("dial-ada", rank=[0, 1], lambda_=[0.5, 2.0], selection=("endpoint-margin", 0.1), ties="davidson"),
    ModelSpec("dial-nopos", lambda_=INF, include_endpoints=False, calibration="W"),
    ModelSpec("dial-anc", rank=2, cov_type="fisher", anchored_cov_type="fixed-basis", level=0.9, seed=3),
    ModelSpec("human", ties="rao-kupper", penalty="firth"),
    ModelSpec("judges", covariate_effects="shared", check=False),
])
def test_a_spec_survives_its_json_record(spec):
    record = json.loads(json.dumps(spec.to_record()))
    assert set(record) == {f.name for f in dataclasses.fields(ModelSpec)}
    assert ModelSpec.from_record(record) == spec


def test_a_record_with_another_key_is_refused_by_name():
    with pytest.raises(ArgumentTypeError, match="'lam'"):
        ModelSpec.from_record({"method": "dial-ada", "lam": [1.0]})
    with pytest.raises(ArgumentTypeError, match="dict"):
        ModelSpec.from_record("dial-ada")


def test_inf_is_a_single_weight_only():
    assert ModelSpec("dial-ada", lambda_=INF).lambda_ == (INF,)
    assert ModelSpec("dial-ada", lambda_=[INF]).weight == INF
    with pytest.raises(ArgumentError, match="inf alone is the anchored endpoint"):
        ModelSpec("dial-ada", lambda_=[1.0, INF])
    with pytest.raises(ArgumentError, match="lambda_"):
        ModelSpec("dial-ada", lambda_=-INF)


def test_selected_and_estimand():
    grid = ModelSpec("dial-ada", rank=[0, 1, 2], lambda_=[0.5, 2.0], selection=("endpoint-margin", 0.0))
    at = grid.selected(2.0, 1)
    assert at == ModelSpec("dial-ada", rank=1, lambda_=[2.0], include_endpoints=False)
    assert at.weight == 2.0 and np.isnan(grid.weight)
    assert grid.selected(0.0, 1) == ModelSpec("human")
    anc = grid.selected(INF, 1)
    assert anc.estimand() == ModelSpec("dial-anc").estimand() == {
        "method": "dial-anc", "rank": 1, "calibration": "mu", "ties": None, "penalty": None, "lambda_": INF,
        "covariate_effects": "judge"}
    # how the fit is made is not what it estimates
    assert ModelSpec("human", cov_type="cell", level=0.9).estimand() == ModelSpec("human").estimand()
    assert ModelSpec("judges", covariate_effects="shared").estimand()["covariate_effects"] == "judge"
    assert ModelSpec("dial-nopos", lambda_=INF).estimand()["method"] == "dial-nopos"


def test_dial_ada_at_the_single_weight_inf_is_dial_anc(data):
    anc = pydial.fit(data, "dial-anc", rank=1)
    ada = pydial.fit(data, "dial-ada", rank=1, lambda_=INF)
    assert ada.lambda_ == INF and ada.gacv is None
    np.testing.assert_array_equal(ada.scores["score"], anc.scores["score"])
    np.testing.assert_array_equal(ada.scores["se"], anc.scores["se"])
    assert result_estimand(ada).differences(result_estimand(anc)) == {}


def test_the_fit_estimand_is_its_spec_at_the_selection(data):
    res = pydial.fit(data, "dial-ada", rank=[0, 1], multiples=[0.5, 2.0])
    est = result_estimand(res)
    assert est.spec == res.spec.selected(res.lambda_, res.rank)
    assert est.spec.rank == res.rank and est.b_source == "llm-only" and est.scores == "s_H"
    assert est.data == data_fingerprint(data)
    assert Estimand.from_record(json.loads(json.dumps(est.to_record()))) == est
    other = dataclasses.replace(est, spec=est.spec.replace(ties="davidson"), b_source="joint")
    assert est.differences(other) == {"ties": (None, "davidson"), "b_source": ("llm-only", "joint")}
    assert est.differences(dataclasses.replace(est, spec=ModelSpec("human"))) == {
        "method": (est.spec.estimand()["method"], "human")}
    assert set(est.differences(Estimand(None, "none", None))) == {"spec"}
    judges = result_estimand(pydial.fit(data, "judges"))
    assert (judges.b_source, judges.scores, judges.spec.method) == ("judge", "s_judges", "judges")
    assert Selection() == est.spec.selection


def test_the_model_owns_its_family_cells_and_chart(data):
    from pydial.estimation.model import DialModel
    from pydial.model.chart import Chart
    from pydial.model.families import family_of

    model = DialModel(data, ModelSpec("dial-ada", rank=1, ties="davidson"))
    assert model.family == family_of("davidson")
    assert model.cells.counts.shape == (len(model.cells.n), 3)  # the tie cells of every judgment
    assert model.chart == Chart.for_data(data, 1, "mu", True)
    res = model.fit()
    assert res.model is model and res.chart == model.chart
    assert DialModel(data, ModelSpec("dial-ada", rank=[0, 1])).chart is None
    assert DialModel(data, ModelSpec("judges")).chart is None
