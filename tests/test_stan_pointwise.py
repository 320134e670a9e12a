"""The pointwise output of a posterior (``log_lik``, replicated and observed counts): only when asked for or when it fits.

Per cell and draw it is four numbers; at leaderboard size (100,000 cells, 4,000 draws) that is tens of GB,
so ``options={"log_lik": ...}`` chooses it: ``"auto"`` (the default) writes it per cell when it is small
and otherwise leaves it out with a warning, an explicit unit is checked against the memory before anything
is compiled, and ``None`` leaves it out.  A posterior without it says so when LOO or a predictive check
asks for it, and a Stan run whose output came back incomplete is a typed error, not a reshape error.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import pydial
from pydial import ArgumentError, MemoryLimitError
from pydial.stan import SamplerWarning, StanBackendError, bayes
from pydial.stan import idata as azio

STOP = RuntimeError("stopped before sampling")


@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=5, K=2, rank=1, n_llm=4000, n_human=1500, seed=3).comparisons


@pytest.fixture
def no_sampling(monkeypatch):
    """Record the run options a posterior would sample with, and stop there (no compile, no Stan)."""
    seen = {}

    def stop(data, req, opt):
        seen["opt"] = opt
        raise STOP

    monkeypatch.setattr(bayes, "_sample_judges", stop)
    monkeypatch.setattr(bayes, "sample_dial", stop)
    return seen


def _run(data, method="human", **options):
    with pytest.raises(RuntimeError, match="stopped before sampling"):
        pydial.posterior(data, method, chains=2, draws=500, seed=1, options=options or None)


def test_auto_writes_small_pointwise_output_per_cell(data, no_sampling):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SamplerWarning)
        _run(data)
    assert no_sampling["opt"].log_lik and not no_sampling["opt"].per_judgment


def test_auto_leaves_out_large_pointwise_output_with_a_warning(data, no_sampling, monkeypatch):
    cells = 50  # every cell observed: K = 2 judges x 10 pairs x 2 orders, and the people's 10 pairs
    need = 2 * 500 * cells * bayes.POINTWISE_BYTES
    monkeypatch.setattr(bayes, "POINTWISE_AUTO_BYTES", need - 1)
    with pytest.warns(SamplerWarning, match=rf"would take about .* GB \(1,000 draws x {cells:,} cells x 96 bytes\); "
                                            r"they are left out.*options=\{'log_lik': 'cell'\}"):
        _run(data, "dial-ada")
    assert not no_sampling["opt"].log_lik
    monkeypatch.setattr(bayes, "POINTWISE_AUTO_BYTES", need)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SamplerWarning)
        _run(data, "dial-ada")
    assert no_sampling["opt"].log_lik


def test_an_approximation_counts_its_draws_not_chains_times_draws(data, no_sampling, monkeypatch):
    monkeypatch.setattr(bayes, "POINTWISE_AUTO_BYTES", 500 * 50 * bayes.POINTWISE_BYTES)  # 50 cells, as above
    with pytest.raises(RuntimeError, match="stopped before sampling"):
        pydial.posterior(data, "dial-ada", chains=2, draws=500, seed=1, algorithm="laplace")
    assert no_sampling["opt"].log_lik  # 500 draws fit; 2 x 500 would not


def test_explicit_pointwise_output_is_checked_against_the_memory(data, no_sampling, monkeypatch):
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "10KB")
    with pytest.raises(MemoryLimitError, match=r"pointwise output of the posterior \(options=\{'log_lik': 'judgment'\}\) "
                                               r"needs about .* GB \(1,000 draws x 5,500 judgments x 96 bytes\).*"
                                               r"options=\{'log_lik': None\}"):
        _run(data, "dial-ada", log_lik="judgment")  # the judges' 4,000 and the people's 1,500
    assert "opt" not in no_sampling  # refused before any compile or sampling


def test_the_people_s_model_counts_the_people_s_cells_only(data, no_sampling, monkeypatch):
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "10KB")
    with pytest.raises(MemoryLimitError, match=r"\(1,000 draws x 10 cells x 96 bytes\)"):  # 10 pairs, not 50 cells
        _run(data, "human", log_lik="cell")


def test_none_leaves_the_pointwise_output_out(data, no_sampling, monkeypatch):
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "10KB")  # nothing pointwise to hold
    _run(data, log_lik=None)
    assert not no_sampling["opt"].log_lik


def test_an_unknown_unit_is_refused(data):
    with pytest.raises(ArgumentError, match="log_lik"):
        pydial.posterior(data, "human", options={"log_lik": "pair"})


def test_incomplete_output_is_a_typed_error_saying_what_to_change():
    from pydial.stan.cmdstan_backend import _stan_variables

    fit = types.SimpleNamespace(metadata=types.SimpleNamespace(stan_vars=["counts_rep"]),
                                stan_variable=lambda name: np.zeros((650, 5, 3)))  # a run cut short: 650 of 4,000
    with pytest.raises(StanBackendError, match=r"holds 650 draws of 'counts_rep' where 1 chain\(s\) x 4,000 draws were "
                                               r"asked for \(9,750 values\).*options=\{'log_lik': None\}"):
        _stan_variables(fit, 1, 4000)


def test_loo_compare_and_ppc_name_the_missing_log_lik():
    obj = azio.build({"posterior": {"x": np.zeros((1, 5))}}, coords={}, dims={}, attrs={})
    for call in (lambda: azio.loo(obj), lambda: azio.compare({"a": obj, "b": obj}), lambda: azio.plot_ppc(obj, "wins_i")):
        with pytest.raises(ArgumentError, match=r"options=\{'log_lik': 'cell'\}"):
            call()


# ------------------------------------------------------------------ on Stan
@pytest.mark.stan
@pytest.mark.parametrize("method", ["human", "dial-anc"])
def test_a_posterior_without_pointwise_output(models, stan_backend_name, data, method):
    """No log_likelihood, posterior_predictive or observed_data group; the estimates are those of the full run."""
    res = pydial.fit(data, method, cov_type="fisher")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)
        idata = pydial.posterior(data, like=res, chains=2, draws=300, warmup=300, seed=4, backend=stan_backend_name,
                                 options={"log_lik": None})
    assert set(azio.group_names(idata)) == {"posterior", "sample_stats"}
    assert idata.attrs["log_lik_unit"] == "none"
    s_h = azio.group_dataset(idata, "posterior")["s_H"].to_numpy().reshape(-1, data.N)
    se = res.scores["se"].to_numpy()
    assert np.all(np.abs(s_h.mean(axis=0) - res.scores["score"].to_numpy()) < 0.5 * se)
    with pytest.raises(ArgumentError, match="has no log_likelihood group"):
        azio.loo(idata)
