"""Argument guards under hostile values: one level validator everywhere, a degenerate
record bootstrap, typed bootstrap / simulate errors, and requests whose memory or work
is predictable refused before any work (without allocating it)."""

from __future__ import annotations

import time
import tracemalloc
import warnings

import numpy as np
import pytest

import pydial
from pydial.exceptions import BootstrapWarning
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError, DialWarning, MemoryLimitError
from pydial.resources import MEMORY_LIMIT_ENV, check_bytes, check_n_jobs, memory_limit
from pydial.studies.diagnostics import judge_diagnostics


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=5, K=2, rank=1, n_llm=1500, n_human=300, seed=3)


@pytest.fixture(scope="module")
def res(sim):
    return pydial.fit(sim.comparisons, method="dial-anc")


def refused_cheaply(call, exc, match):
    """``call()`` raises ``exc`` (message matching ``match``) within seconds and a few MB: before any work."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(exc, match=match) as info:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 20 and peak < 50e6, (time.perf_counter() - t0, peak)
    return str(info.value)


# ------------------------------------------------------------------------- levels
LEVEL_CALLS = {
    "fit": lambda sim, res, lv: pydial.fit(sim.comparisons, method="human", level=lv),
    "conf_int": lambda sim, res, lv: res.conf_int(lv),
    "contrast": lambda sim, res, lv: res.contrast("item00", "item01", level=lv),
    "bootstrap": lambda sim, res, lv: res.bootstrap(5, level=lv, progress=False),
    "plan": lambda sim, res, lv: pydial.plan(res, budgets=[100], level=lv),
    "judge_diagnostics": lambda sim, res, lv: judge_diagnostics(sim.comparisons, n_boot=5, level=lv),
}


@pytest.mark.parametrize("call", sorted(LEVEL_CALLS))
@pytest.mark.parametrize("level", [1.5, -3, 0, 1.0, float("nan")])
def test_every_level_argument_is_validated_alike(sim, res, call, level):
    """``contrast(level=1.5)`` used to return NaN intervals labelled 150%; every level is checked by one validator."""
    with pytest.raises(ArgumentError, match=r"level \(.*\) must be in the open interval \(0, 1\)"):
        LEVEL_CALLS[call](sim, res, level)


@pytest.mark.parametrize("call", sorted(LEVEL_CALLS))
@pytest.mark.parametrize("level", ["0.9", True, [0.9]])
def test_level_of_the_wrong_type(sim, res, call, level):
    with pytest.raises(ArgumentTypeError, match="level must be a number in"):
        LEVEL_CALLS[call](sim, res, level)


def test_contrast_at_a_valid_level_is_labelled_with_it(res):
    c = res.contrast("item00", "item01", level=0.8)
    wide = res.contrast("item00", "item01", level=0.99)
    assert c["level"] == 0.8 and np.isfinite(c["ci_low"]) and wide["ci_high"] - wide["ci_low"] > c["ci_high"] - c["ci_low"]


# ---------------------------------------------------------------------- bootstrap
def test_single_record_bootstrap_is_nan_with_a_warning(sim):
    frame = sim.frame.assign(record_id="only")
    res = pydial.fit(pydial.Comparisons.from_frame(frame), method="human")
    with pytest.warns(BootstrapWarning, match="1 record.*every resample is the data itself") as rec:
        bt = res.bootstrap(20, seed=1, progress=False)
    assert issubclass(rec[0].category, DialWarning)
    for tab in (bt.scores, bt.contrasts):
        assert tab[["boot_se", "pct_low", "pct_high", "basic_low", "basic_high"]].isna().all().all()
    assert np.isfinite(bt.scores["estimate"]).all() and len(bt.selection) == 0 and bt.n_failed == 0


def test_single_human_record_warns_that_its_variability_is_left_out():
    sim = pydial.simulate(N=4, K=2, rank=1, n_llm=600, n_human=200, seed=2)
    human = sim.frame["judge"] == "human"
    frame = sim.frame.assign(record_id=np.where(human, "h", sim.frame["record_id"].astype(str)))
    res = pydial.fit(pydial.Comparisons.from_frame(frame), method="judges")
    with pytest.warns(BootstrapWarning, match="human-labelled records are a single record"):
        bt = res.bootstrap(3, seed=1, progress=False)
    assert np.isfinite(bt.scores["boot_se"]).all()


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n_jobs": 0}, ArgumentError, "n_jobs must be a positive number of workers or negative"),
    ({"n_jobs": 1.5}, ArgumentTypeError, "n_jobs must be an integer"),
    ({"seed": -1}, ArgumentError, r"seed must be in \[0, 2\*\*32\)"),
    ({"seed": "x"}, ArgumentTypeError, "seed must be None or a non-negative integer"),
    ({"B": 2.5}, ArgumentTypeError, "B must be an integer >= 2"),
    ({"B": 1}, ArgumentError, "B must be an integer >= 2"),
])
def test_bootstrap_argument_errors_are_typed(res, kwargs, exc, match):
    args = {"B": 5, "progress": False, **kwargs}
    with pytest.raises(exc, match=match):
        res.bootstrap(args.pop("B"), **args)


def test_bootstrap_of_counts_and_of_atc_are_typed_errors(sim):
    f = sim.frame
    counts = f.assign(wins_a=(f.winner == "a").astype(int), wins_b=(f.winner == "b").astype(int), ties=0)
    data = pydial.Comparisons.from_counts(counts[["judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties"]])
    res = pydial.fit(data, method="human")
    with pytest.raises(DataError, match="no record ids"):
        res.bootstrap(5, progress=False)
    atc = pydial.fit(sim.comparisons, method="atc")
    with pytest.raises(ArgumentError, match="method='atc'"):
        atc.bootstrap(5, progress=False)


def test_bootstrap_with_huge_B_refused_before_any_refit(res):
    msg = refused_cheaply(lambda: res.bootstrap(10**8, progress=False), MemoryLimitError, r"bootstrap\(B=100,000,000\)")
    assert "GB" in msg and "reduce B" in msg


# ------------------------------------------------------------------------ simulate
@pytest.mark.parametrize("kwargs, match", [
    ({"N": 10**9}, r"N=1,000,000,000.*pairs"),
    ({"n_llm": 10**12}, r"n_llm=1,000,000,000,000.*rows"),
    ({"N": 10**5, "K": 50}, "pairs"),
])
def test_simulate_too_large_refused_before_drawing(kwargs, match):
    msg = refused_cheaply(lambda: pydial.simulate(**kwargs), MemoryLimitError, match)
    assert "GB" in msg and "reduce" in msg


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"seed": "x"}, ArgumentTypeError, "seed must be None, a numpy.random.Generator or a non-negative integer"),
    ({"seed": 1.5}, ArgumentTypeError, "seed must be"),
    ({"seed": -1}, ArgumentError, r"seed must be in \[0, 2\*\*32\)"),
    ({"seed": 2**32}, ArgumentError, r"seed must be in \[0, 2\*\*32\)"),
    ({"beta": "big", "covariates": ["length"]}, ArgumentTypeError, "beta must be a number"),
    ({"N": "10"}, ArgumentTypeError, "N must be an integer"),
    ({"behavior": {"p_first": "half"}}, ArgumentTypeError, "p_first must be a real number"),
    ({"behavior": [("p_first", 0.5)]}, ArgumentTypeError, "behavior must be a JudgeBehavior or a mapping"),
])
def test_simulate_argument_errors_are_typed(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pydial.simulate(**{"N": 4, "K": 2, "n_llm": 50, "n_human": 20, **kwargs})


def test_simulate_seed_generator_still_accepted():
    a = pydial.simulate(N=4, K=2, n_llm=50, n_human=20, seed=np.random.default_rng(1))
    b = pydial.simulate(N=4, K=2, n_llm=50, n_human=20, seed=np.random.default_rng(1))
    assert a.frame.equals(b.frame)


def test_memory_limit_env_caps_the_estimate(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1MB")
    assert memory_limit() == 10**6
    msg = refused_cheaply(lambda: pydial.simulate(N=4, K=2, n_llm=100_000, n_human=10), MemoryLimitError,
                          "PYDIAL_MEMORY_LIMIT")
    assert "0.00 GB are available" in msg
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(ArgumentError, match="PYDIAL_MEMORY_LIMIT='lots' is not a number of bytes"):
        memory_limit()
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "-5GB")
    with pytest.raises(ArgumentError, match="PYDIAL_MEMORY_LIMIT"):
        memory_limit()


def test_check_bytes_and_n_jobs_helpers():
    check_bytes(10, "x", "y", available=100)
    with pytest.raises(MemoryLimitError, match=r"^x needs about 1e\+03 GB \(1 row\), but only 0.00 GB .*; y$"):
        check_bytes(10**12, "x", "y", detail="1 row", available=100)
    assert check_n_jobs(-1) == -1 and check_n_jobs(np.int64(3)) == 3
    for bad, exc in ((0, ArgumentError), (True, ArgumentTypeError), ("2", ArgumentTypeError)):
        with pytest.raises(exc, match="n_jobs"):
            check_n_jobs(bad)


# ------------------------------------------------------------------------ planning
def test_next_pairs_with_huge_n_refused_with_the_estimate(res):
    msg = refused_cheaply(lambda: pydial.next_pairs(res, 10**9, "contrast"), ArgumentError,
                          r"next_pairs\(n=1,000,000,000\) would take about")
    assert "propose at most about" in msg and "refit" in msg
    assert len(pydial.next_pairs(res, 20, "ranking", k=2)) > 0  # a normal request runs


def test_next_pairs_ranking_memory_checked(res, monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "100")
    refused_cheaply(lambda: pydial.next_pairs(res, 5, "ranking", k=2), MemoryLimitError, "contrasts")


def test_plan_simulate_with_huge_budget_refused_before_any_replication(res):
    msg = refused_cheaply(lambda: pydial.plan(res, budgets=[10**15], method="simulate", n_sim=2), MemoryLimitError,
                          r"plan\(method='simulate', budgets up to 1,000,000,000,000,000")
    assert "method='theory'" in msg
    # formulas only (no memory per budget); the noncentral chi-square of DIAL-Ada's weight stays finite
    theory = pydial.plan(res, budgets=[10**4, 10**15], method="theory")
    num = theory.drop(columns=["budget", "method"])
    assert len(theory) == 6 and np.isfinite(num.to_numpy(float)).all()
    ada = theory.set_index(["budget", "method"])["excess_risk"]
    assert abs(ada[(10**15, "dial-ada")]) < 1e-12 < ada[(10**4, "dial-ada")]  # the people's rate, not the anchored bias


@pytest.mark.parametrize("kwargs, exc", [({"n_jobs": 0}, ArgumentError), ({"n_sim": 10**12}, MemoryLimitError),
                                         ({"n_sim": 1}, ArgumentError)])
def test_plan_simulate_arguments(res, kwargs, exc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refused_cheaply(lambda: pydial.plan(res, budgets=[100], method="simulate", **{"n_sim": 2, **kwargs}), exc, "")
