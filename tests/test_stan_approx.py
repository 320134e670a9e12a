"""Fast approximate posteriors: CmdStan's Laplace approximation and Pathfinder (``posterior(..., algorithm=)``).

On correctly specified simulated data with plenty of judgments the posterior is close to normal
(Bernstein-von Mises), so both approximations must reproduce what the theory gives: posterior means
within a fraction of a standard error of the MLE and posterior standard deviations near the
model-based (Fisher) standard errors of the matching frequentist fit.  They keep the estimand
record, the InferenceData layout and :func:`compare_intervals`; httpstan has neither, and says so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pydial import fit
from pydial.studies.simulate import simulate
from pydial.stan import StanBackendError, compare_intervals, estimand, posterior
from pydial.stan.idata import group_dataset, group_names

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def data():
    return simulate(N=5, K=3, rank=1, n_llm=8000, n_human=1500, seed=7).comparisons


def _quiet(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return posterior(**kw)


@pytest.mark.parametrize("algorithm", ["laplace", "pathfinder"])
def test_approximation_agrees_with_the_fisher_fit(models, stan_backend_name, data, algorithm):
    if stan_backend_name != "cmdstanpy":
        pytest.skip("the approximations are CmdStan's (the httpstan case is tested below)")
    res = fit(data, "human", cov_type="fisher")
    idata = _quiet(data=data, like=res, algorithm=algorithm, chains=2, draws=2000, seed=5)
    assert idata.attrs["algorithm"] == algorithm
    assert estimand(idata).spec == res.spec
    post = group_dataset(idata, "posterior")
    assert post.sizes["chain"] == 1 and post.sizes["draw"] == 2000  # draws honoured: chains are NUTS's
    assert {"posterior", "log_likelihood", "posterior_predictive", "observed_data"} <= set(group_names(idata))
    tab = compare_intervals(res, idata)
    assert algorithm.capitalize()[:7] in tab.attrs["interval"]
    se = res.scores["se"].to_numpy()
    x = post["s_H"].to_numpy().reshape(-1, data.N)
    # means within 0.2 SE of the MLE (Monte Carlo error of 2,000 draws is 0.02 SE), sd within 12% of the Fisher SE
    assert np.all(np.abs(x.mean(axis=0) - res.scores["score"].to_numpy()) < 0.2 * se)
    np.testing.assert_allclose(x.std(axis=0, ddof=1) / se, 1.0, atol=0.12)


def test_laplace_cut_posterior_of_dial_anc(models, stan_backend_name, data):
    """The Laplace approximation of the LLM-only stage (pydial's own, on any backend), then the exact calibration given each draw of M."""
    res = fit(data, "dial-anc", rank=1, cov_type="fisher")
    idata = _quiet(data=data, like=res, algorithm="laplace", chains=1, draws=800, warmup=200, seed=2)
    est = estimand(idata)
    assert est.spec == res.spec and est.weight == float("inf")
    tab = compare_intervals(res, idata)
    assert np.all(np.abs(tab.loc["score", "shift_se"]) < 0.3), tab["shift_se"]
    assert np.all((tab.loc["score", "width_ratio"] > 0.75) & (tab.loc["score", "width_ratio"] < 1.35))


@pytest.mark.parametrize("algorithm", ["laplace", "pathfinder"])
def test_a_failed_approximation_is_a_convergence_error_with_cmdstans_messages(models, stan_backend_name, data,
                                                                              algorithm):
    """A start where the log density is about -1e302 stops both algorithms at once: pydial's typed error
    with CmdStan's last console lines and the other algorithms named, not cmdstanpy's bare RuntimeError."""
    from pydial import ConvergenceError
    from pydial.stan.schema import CellTable, human_cell_table, judges_data

    if stan_backend_name != "cmdstanpy":
        pytest.skip("the approximations are CmdStan's")
    d = judges_data(CellTable.empty(), human_cell_table(data), N=data.N, K=0, order=False, flat=True, log_lik=False)
    with pytest.raises(ConvergenceError, match=f"CmdStan's {algorithm} failed(.|\n)*(Iter|iteration)(.|\n)*Try another"):
        models["judges"].approximate(d, algorithm=algorithm, draws=10, seed=1, init={"sH_raw": np.full(data.N - 1, 1e300)})


def test_httpstan_names_the_cmdstan_way(models, stan_backend_name, data):
    if stan_backend_name != "httpstan":
        pytest.skip("checks the httpstan backend")
    with pytest.raises(StanBackendError, match="cmdstanpy.install_cmdstan"):
        posterior(data, method="human", algorithm="laplace", chains=1, draws=10, backend="httpstan")


def test_unknown_algorithm_is_refused_before_any_work(data):
    with pytest.raises(ValueError, match="algorithm must be one of"):
        posterior(data, algorithm="advi")
