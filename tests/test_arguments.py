"""Bad arguments are refused before any work, by a typed error naming the argument; old names still work.

Every case is refused with :class:`pydial.ArgumentError` (also a ``ValueError``; the
type errors also a ``TypeError``) whose message names the offending argument, and
before anything is estimated or compiled: the estimators and the Stan compiler are
replaced by functions that fail the test if they are reached.
"""

from __future__ import annotations

import pathlib
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import pydial
import pydial.api
from pydial.exceptions import ArgumentError, ArgumentTypeError, ArgumentWarning

PACKAGE = pathlib.Path(pydial.__file__).parent


@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=5, K=3, rank=1, n_llm=3000, n_human=400, seed=3).comparisons


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if an estimator is reached."""
    def reached(*args, **kwargs):
        raise AssertionError("the estimator ran before the arguments were checked")
    monkeypatch.setattr(pydial.estimation.model, "estimate", reached)


FIT_CASES = [
    # (keyword arguments, the argument the message must name, an error that is also a TypeError)
    (dict(method="dial"), "method", False),
    (dict(method=None), "method", False),
    (dict(rank=-1), "rank", False),
    (dict(rank=1.5), "rank", True),
    (dict(rank="many"), "rank", False),
    (dict(method="dial-anc", rank=[0, 1]), "rank", False),
    (dict(calibration="V"), "calibration", False),
    (dict(ties="bradley"), "ties", False),
    (dict(ties=np.array(["davidson", "davidson"])), "ties", False),
    (dict(calibration=np.array(["mu"])), "calibration", False),
    (dict(cov_type=pd.NA), "cov_type", False),
    (dict(penalty="ridge"), "penalty", False),
    (dict(method="dial-ada", lambda_=[]), "lambda_", False),
    (dict(method="dial-ada", lambda_=[1.0, -2.0]), "lambda_", False),
    (dict(method="dial-ada", lambda_=[np.nan]), "lambda_", False),
    (dict(method="dial-ada", multiples=[0.0]), "multiples", False),
    (dict(include_endpoints="both"), "include_endpoints", False),
    (dict(cov_type="sandwich"), "cov_type", False),
    (dict(anchored_cov_type="one-step"), "anchored_cov_type", False),
    (dict(cluster_correction="yes"), "cluster_correction", False),
    (dict(level=0.0), "level", False),
    (dict(level=1.0), "level", False),
    (dict(level="95%"), "level", True),
    (dict(engine="torch"), "engine", False),
    (dict(seed=-1), "seed", False),
    (dict(seed=2.5), "seed", True),
    (dict(seed=True), "seed", True),
    (dict(check="no"), "check", False),
    (dict(covariance="cell"), "covariance", True),
]


@pytest.mark.parametrize("kwargs,name,is_type", FIT_CASES, ids=[str(c[0]) for c in FIT_CASES])
def test_fit_refuses_a_bad_argument_before_any_work(data, no_work, kwargs, name, is_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ArgumentWarning)
        with pytest.raises(ArgumentError, match=re.escape(name)) as err:
            pydial.fit(data, **kwargs)
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, TypeError) == is_type, type(err.value)


def test_fit_refuses_what_is_not_data(no_work):
    with pytest.raises(ArgumentTypeError, match="data must be a pydial.Comparisons"):
        pydial.fit({"item_a": [1]}, "human")


def test_fit_of_a_simulation_points_to_its_comparisons(no_work):
    sim = pydial.simulate(N=4, K=2, n_llm=40, n_human=20, seed=1)
    with pytest.raises(ArgumentTypeError, match=r"got Simulation; pass the simulation's \.comparisons"):
        pydial.fit(sim, "human")


def test_result_methods_refuse_bad_arguments(data):
    res = pydial.fit(data, "dial-anc")
    cases = [
        (lambda: res.with_cov("sandwich"), "cov_type"),
        (lambda: res.with_cov(anchored_cov_type="one-step"), "anchored_cov_type"),
        (lambda: res.with_cov(cluster_correction="yes"), "cluster_correction"),
        (lambda: res.cov_params(what="c"), "what"),
        (lambda: res.conf_int(level=1.5), "level"),
    ]
    for call, name in cases:
        with pytest.raises(ArgumentError, match=re.escape(name)):
            call()


def test_simulate_and_split_refuse_bad_arguments(data):
    with pytest.raises(ArgumentError, match=r"rank \(3\) must satisfy rank <= K-1 = 2"):
        pydial.simulate(N=5, K=3, rank=3)
    with pytest.raises(ArgumentError, match="ties must be"):
        pydial.simulate(N=5, K=3, tie_rate=0.2, ties="bradley")
    with pytest.raises(ArgumentError, match="needs tie_rate > 0"):
        pydial.simulate(N=5, K=3, ties="davidson")
    with pytest.raises(TypeError, match="unexpected keyword argument 'rnk'"):
        pydial.simulate(N=5, K=3, rnk=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'r'"):
        pydial.simulate(N=5, K=3, r=1)


# --------------------------------------------------------------------------- the specification
def test_the_spec_of_a_fit_reproduces_it(data):
    res = pydial.fit(data, "dial-ada", multiples=[0.5, 1.0, 2.0], cov_type="binomial", seed=5)
    assert isinstance(res.spec, pydial.ModelSpec) and res.spec.method == "dial-ada" and res.spec.rank == 1
    again = pydial.fit(data, spec=res.spec)
    np.testing.assert_array_equal(again.scores.to_numpy(), res.scores.to_numpy())
    assert again.lambda_ == res.lambda_
    assert pydial.fit(data, **res.fit_arguments).scores.equals(res.scores)
    changed = res.spec.replace(cov_type="fisher")
    assert changed.cov_type == "fisher" and res.spec.cov_type == "binomial"
    with pytest.raises(ArgumentError, match="cov_type"):
        res.spec.replace(cov_type="sandwich")


def test_an_argument_warning_points_at_the_callers_line(data):
    with pytest.warns(ArgumentWarning, match="rank=2 is ignored: method 'human' does not use rank") as caught:
        pydial.fit(data, "human", rank=2)
    assert caught[0].filename == __file__


def test_no_bare_value_or_type_errors_are_raised_by_the_package():
    """Every error pydial raises on purpose is one of its typed errors (pydial.exceptions)."""
    bare = [f"{p.relative_to(PACKAGE)}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"raise (ValueError|TypeError)\b", line)]
    assert bare == []


# --------------------------------------------------------------------------- posterior
@pytest.fixture
def no_compile(monkeypatch):
    """Fail the test if a Stan program would be compiled (so no case needs Stan installed)."""
    import pydial.stan.bayes as bayes
    import pydial.stan.dial_posterior as dial_posterior

    def reached(*args, **kwargs):
        raise AssertionError("a Stan program was compiled before the arguments were checked")
    monkeypatch.setattr(bayes, "compile_model", reached)
    monkeypatch.setattr(dial_posterior, "compile_model", reached)


POSTERIOR_CASES = [
    (dict(method="pooled"), "method 'pooled' has no posterior counterpart", False),
    (dict(method="dial"), "method", False),
    (dict(rank=-1), "rank", False),
    (dict(calibration="V"), "calibration", False),
    (dict(ties="bradley"), "ties", False),
    (dict(lambda_=0.0), "lambda_", False),
    (dict(lambda_="big"), "lambda_", True),
    (dict(method="dial-anc", lambda_=2.0), "lambda_", False),
    (dict(method="human", lambda_=2.0), "lambda_ applies to the DIAL methods only", False),
    (dict(chains=0), "chains", False),
    (dict(draws=-1), "draws", False),
    (dict(draws=10.5), "draws", True),
    (dict(warmup=-5), "warmup", False),
    (dict(seed=-3), "seed", False),
    (dict(options={"adapt_delta": 1.2}), "adapt_delta", False),
    (dict(options={"max_depth": 0}), "max_depth", False),
    (dict(options={"init": "zero"}), "init", False),
    (dict(options={"init": "spectral"}), "init must be one of ('point-start', 'random')", False),
    (dict(chains=2, options={"init": [{}]}), "init", False),
    (dict(options={"log_lik": "record"}), "log_lik", False),
    (dict(algorithm="advi"), "algorithm", False),
    (dict(options={"b_stage": "human"}), "b_stage", False),
    (dict(priors={"prior_q_sd": 1.0}), "prior_q_sd", False),
    (dict(options={"extra": {"x": 1.0}}), "extra data are for a user's program", False),
    (dict(thin=2), "thin", True),
    (dict(options={"thin": 2}), "unknown option(s) ['thin']", True),
    (dict(options=[("adapt_delta", 0.9)]), "options must be a dict", True),
    (dict(backend="pystan"), "backend", False),
]


@pytest.mark.parametrize("kwargs,name,is_type", POSTERIOR_CASES, ids=[str(c[0]) for c in POSTERIOR_CASES])
def test_posterior_refuses_a_bad_argument_before_compiling(data, no_compile, kwargs, name, is_type):
    with pytest.raises(ArgumentError, match=re.escape(name)) as err:
        pydial.posterior(data, **kwargs)
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, TypeError) == is_type, type(err.value)


def test_posterior_checks_extra_data_against_the_programs_data_block(data, no_compile, tmp_path):
    program = tmp_path / "gap.stan"
    shipped = (pathlib.Path(pydial.stan.programs.program_dir()) / "judges.stan").read_text()
    program.write_text(shipped.replace("data {", "data {\n  real<lower=0> prior_kappa_sd;  // added", 1))
    with pytest.raises(ArgumentError, match=r"extra data \['kapa'\] are not declared .* reads \['prior_kappa_sd'\]"):
        pydial.posterior(data, "judges", options={"program": str(program), "extra": {"kapa": 1.0}})
    with pytest.raises(ArgumentError, match=r"declares the data \['prior_kappa_sd'\] that pydial does not provide"):
        pydial.posterior(data, "judges", options={"program": str(program)})


def test_compare_intervals_refuses_what_is_not_a_posterior(data):
    res = pydial.fit(data, "human")
    with pytest.raises(ArgumentError, match="posterior"):
        pydial.compare_intervals(res, {})


def test_posterior_of_a_spec_without_a_single_posterior_is_refused(data, no_compile):
    with pytest.raises(ArgumentError, match="rank grid"):
        pydial.posterior(data, spec=pydial.ModelSpec("dial-ada", rank=[0, 1]))
    with pytest.raises(pydial.EstimandMismatchError, match="penalized"):
        pydial.posterior(data, spec=pydial.ModelSpec("human", penalty="firth"))
    with pytest.raises(ArgumentTypeError, match="spec must be a pydial.ModelSpec"):
        pydial.posterior(data, spec={"method": "human"})
    with pytest.raises(ArgumentError, match="method 'pooled' has no posterior counterpart"):
        pydial.posterior(data, spec=pydial.ModelSpec("pooled"))
