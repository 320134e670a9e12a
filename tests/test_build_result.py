"""A result is built once: an estimator returns an ``Estimate`` (point estimates and linearizations),
``DialModel.fit`` forms every covariance table from the linearizations and constructs the frozen
``DialResult`` with its verdict in one call; nothing is assigned to a result afterwards."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import pydial
import pydial.api
from pydial.estimation.estimators import estimate
from pydial.estimation.steps import numpy_optimizers
from pydial.estimation.model import DialModel
from pydial.estimation.results import DialResult, Estimate, result_of
from pydial.estimation.verdict import verdict
from pydial.inference.wald import covariances, tables
from test_with_cov import data, quiet, tied  # noqa: F401  (the data sets and helper of the with_cov tests)

METHODS = ["human", "judges", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"]
TABLES = ["scores", "cov", "position_effects", "position_effects_cov", "consensus", "tie_parameters", "judge_scores_se"]
OTHER = {"fisher": "record", "binomial": "cell", "cell": "binomial", "record": "fisher"}




def assert_same_tables(a: DialResult, b: DialResult) -> None:
    for name in TABLES:
        ta, tb = getattr(a, name), getattr(b, name)
        assert (ta is None) == (tb is None), name
        if ta is not None:
            assert list(ta.index) == list(tb.index) and list(ta.columns) == list(tb.columns), name
            np.testing.assert_allclose(ta.to_numpy(float), tb.to_numpy(float), rtol=1e-12, atol=1e-14, err_msg=name)


def sources() -> list[Path]:
    root = Path(pydial.__file__).parent
    return sorted((root / "estimation").glob("*.py")) + [root / "api.py"]


def test_no_attribute_is_assigned_to_a_result_after_construction():
    fields = "|".join(f.name for f in dataclasses.fields(DialResult))
    patterns = [re.compile(r"\b(res|out)\.\w+ = "), re.compile(rf"^\s*[\w.]+\.({fields})\s*=[^=]", re.M)]
    found = [f"{path.name}: {m.group(0).strip()}" for path in sources() for p in patterns
             for m in p.finditer(path.read_text())]
    assert found == []
    assert not any("unknown_cov" in path.read_text() for path in sources())


@pytest.mark.parametrize("ties", [None, "davidson"])
@pytest.mark.parametrize("method", METHODS)
def test_the_fits_tables_are_those_of_with_cov(data, tied, method, ties):
    res = quiet(pydial.fit, data if ties is None else tied, method, ties=ties)
    assert_same_tables(res, quiet(res.with_cov, res.cov_type))
    # formed again from the linearization by with_cov, through another meat and back
    back = quiet(quiet(res.with_cov, OTHER[res.cov_type]).with_cov, res.cov_type)
    assert_same_tables(res, back)
    assert (back.status, back.problems) == (res.status, res.problems)
    if method == "atc":  # no linearization of the isotonic step: a NaN covariance, explicitly
        assert res.scores["se"].isna().all() and np.isnan(res.cov.to_numpy()).all()
    else:
        assert np.isfinite(res.cov.to_numpy()).all()


def test_fit_is_the_estimate_built_once(data):
    spec = pydial.ModelSpec("dial-ada", multiples=[0.1, 1.0, 10.0])
    res = quiet(pydial.fit, data, spec=spec)
    grid = spec.check_data(data)
    est = quiet(estimate, data, spec, numpy_optimizers(), grid)
    assert isinstance(est, Estimate) and not hasattr(est, "cov")
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.lambda_ = 0.0  # type: ignore[misc]
    C = covariances(est.linearization, data, spec.resolved_cov_type, spec.anchored_cov_type, spec.cluster_correction)
    built = result_of(DialModel(data, spec), est, C, [])
    assert "tables" not in built.__dict__  # formed when first asked
    assert built.tables.keys() == tables(est, C, data, spec.level, spec.ties).keys()
    assert_same_tables(built, res)
    assert (built.rank, built.calibration, built.lambda_, built.anchored_cov_type) == (res.rank, res.calibration,
                                                                                       res.lambda_, res.anchored_cov_type)
    num = res.gacv.select_dtypes("number").columns
    np.testing.assert_allclose(built.gacv[num].to_numpy(float), res.gacv[num].to_numpy(float), rtol=1e-10)
    assert built.spec is spec and built.fitter == DialModel.fit_spec
    assert built.fit_warnings == () and built.status == "ok"


def test_the_result_is_frozen_and_its_verdict_comes_from_the_estimate(data):
    res = quiet(pydial.fit, data, "human")
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.status = "not converged"  # type: ignore[misc]
    status, problems = verdict(res.spec, dataclasses.replace(res.estimate, converged=False), data, [])
    assert status == "not converged" and "not a resolved optimum" in problems[0] and res.status == "ok"
