"""Pathfinder returns draws only where its importance ratios are reliable, and otherwise refuses with the reason.

CmdStan's multi-path Pathfinder resamples its paths' normal approximations by importance weights.  On the
posteriors of the structured DIAL models the ratios have a tail too heavy for that (Pareto ``k`` well above
0.7 from N = 12 items on), and the resampled draws repeat a few points.  pydial asks CmdStan for every
path's draws with both log densities, computes the Pareto-smoothed weights and ``k`` itself, and either
resamples ``draws`` of them or raises a :class:`~pydial.ConvergenceError` that names ``k`` and the
algorithms to use instead.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pydial
from pydial import ConvergenceError
from pydial.stan.cmdstan_backend import PATHFINDER_MAX_K, _pathfinder_draws
from pydial.stan.idata import group_dataset, psislw

NAMES = ["lp__", "lp_approx__", "x"]


def _raw(log_ratio: np.ndarray) -> np.ndarray:
    lp_approx = -0.5 * np.arange(log_ratio.size) / log_ratio.size
    return np.column_stack([lp_approx + log_ratio, lp_approx, np.arange(log_ratio.size, dtype=float)])


def test_equal_ratios_give_equal_weights_and_a_small_k():
    lw, k = psislw(np.full(4000, 3.0))
    np.testing.assert_allclose(np.exp(lw), 1 / 4000, rtol=1e-12)
    assert k == -np.inf


def test_smoothed_weights_recover_the_target_mean():
    """Draws of N(0, 1) weighted toward N(0.5, 1): the weighted mean is 0.5 within its Monte Carlo error."""
    x = np.random.default_rng(4).normal(size=20_000)
    lw, k = psislw(0.5 * x - 0.125)  # log N(x; 0.5, 1) - log N(x; 0, 1)
    w = np.exp(lw)
    assert abs(w.sum() - 1) < 1e-12 and k < PATHFINDER_MAX_K
    ess = 1 / np.sum(w**2)
    assert abs(w @ x - 0.5) < 4 / np.sqrt(ess)
    assert abs(w @ x**2 - (w @ x) ** 2 - 1) < 0.1  # the target's variance


def test_ratios_of_a_matching_approximation_are_resampled_to_the_draws_asked_for():
    rng = np.random.default_rng(1)
    raw = _raw(rng.normal(0, 0.1, 4000))  # a good approximation: nearly equal weights
    raw[7, 0] = -np.inf  # a draw outside the support: weight 0, never returned
    keep = _pathfinder_draws(raw, NAMES, 1000, seed=3)
    assert keep.size == 1000 and 7 not in keep
    assert np.unique(keep).size > 800  # 1,000 of 4,000 nearly equal weights, with replacement: about 885 distinct
    np.testing.assert_array_equal(keep, _pathfinder_draws(raw, NAMES, 1000, seed=3))  # seeded


def test_heavy_tailed_ratios_are_refused_with_their_pareto_k():
    rng = np.random.default_rng(2)
    raw = _raw(3.0 * rng.standard_t(2, 4000))  # the posterior's tail far beyond the approximation's
    k = psislw(raw[:, 0] - raw[:, 1])[1]
    assert k > PATHFINDER_MAX_K
    with pytest.raises(ConvergenceError, match=rf"Pareto k of the importance ratios of their 4,000 draws \(4 paths\) "
                                               rf"is {k:.2f} > 0.7.*use algorithm='laplace'"):
        _pathfinder_draws(raw, NAMES, 1000, seed=3)


@pytest.mark.stan
def test_pathfinder_on_a_dial_posterior_is_refused_and_laplace_works(models, stan_backend_name):
    if stan_backend_name != "cmdstanpy":
        pytest.skip("the approximations are CmdStan's")
    data = pydial.simulate(N=12, K=4, n_llm=10_000, n_human=2_000, seed=1).comparisons
    with pytest.raises(ConvergenceError, match=r"Pathfinder's normal approximations do not match this posterior: the "
                                               r"Pareto k .* > 0\.7"):
        pydial.posterior(data, "dial-ada", algorithm="pathfinder", draws=500, seed=1, backend="cmdstanpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pydial.posterior(data, "dial-ada", algorithm="laplace", draws=500, seed=1, backend="cmdstanpy")
    assert group_dataset(idata, "posterior").sizes["draw"] == 500
