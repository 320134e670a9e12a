"""Firth with ties on both engines: ``fit(..., ties=..., penalty="firth", engine="stan")``.

Stan's tie programs add the Jeffreys prior of the tie GLMs (``tie_firth_penalty`` of
``stan/include/firth.stan``, written from the outcome probabilities' derivatives; autodiff
gives its gradient), numpy adds the family's :class:`pydial.model.penalty.FirthPenalty` /
``CalibrationFirthPenalty`` (exact gradients from ``information_terms``).  Two independent
codings of one estimator: the optima must agree, for every method and both tie families, and
differ from the unpenalized MLE by much more than the agreement.
"""

import numpy as np
import pytest

from pydial.model.families import family_of
import pydial

pytestmark = [pytest.mark.stan, pytest.mark.usefixtures("stan_backend_name")]

METHODS = [("human", {}), ("judges", {}), ("pooled", {}), ("dial-anc", {}),
           ("dial-ada", {"lambda_": [2.0], "include_endpoints": False})]


@pytest.fixture(scope="module")
def tdata():
    return pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=120, tie_rate=0.2, ties="davidson", seed=8).comparisons


@pytest.mark.filterwarnings("ignore::pydial.DataWarning")
@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
@pytest.mark.parametrize("method,kw", METHODS, ids=[m for m, _ in METHODS])
def test_stan_tie_firth_optimum_is_numpys(models, tdata, ties, method, kw):
    a = pydial.fit(tdata, method, ties=ties, penalty="firth", **kw)
    b = pydial.fit(tdata, method, ties=ties, penalty="firth", engine="stan", **kw)
    ml = pydial.fit(tdata, method, ties=ties, **kw)
    assert a.ok and b.ok
    np.testing.assert_allclose(b.scores["score"], a.scores["score"], atol=2e-7)
    col = family_of(ties).label
    np.testing.assert_allclose(b.tie_parameters[col], a.tie_parameters[col], atol=2e-7)
    np.testing.assert_allclose(b.scores["se"], a.scores["se"], rtol=1e-5)
    assert np.abs(a.scores["score"] - ml.scores["score"]).max() > 5e-3  # the prior moves the estimate


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_tie_joint_log_prob_equals_the_penalized_numpy_objective(models, tdata, ties):
    """dial.stan with ties and firth = 2 at random (theta, log nu): the log density and its gradient equal
    minus n_H times numpy's penalized tie objective (the people's nu_H free)."""
    from pydial.model.chart import Chart
    from pydial.model.likelihood import Objective, tie_totals
    from pydial.stan.parameters import dial_from_unconstrained as from_stan, dial_unconstrained as to_stan
    from pydial.stan.schema import dial_data, weighted_log_coef

    m = models["dial"]
    n_l, n_h = tie_totals(tdata)
    rng = np.random.default_rng(4)
    for cal in ("mu", "W"):
        ch = Chart(tdata.N, tdata.K, 1, cal, True)
        lam = 0.7
        d = dial_data(tdata, ch, w_llm=lam * n_h / n_l, w_human=1.0, family=family_of(ties), boundary_nu=True, firth=2)
        obj = Objective.weighted(ch, tdata, lam, "firth", ties=ties)
        assert obj.n_tie == tdata.K + 1 and d["nu_zero"].sum() == 0  # every group has ties: x is theta, then every log nu
        x = np.concatenate([rng.normal(scale=0.5, size=ch.dim), rng.normal(-0.6, 0.2, size=obj.n_tie)])
        lp, grad = m.log_prob(d, to_stan(d, x)), from_stan(d, m.grad_log_prob(d, to_stan(d, x)))
        assert -(lp - weighted_log_coef(d)) / n_h == pytest.approx(obj.value(x), rel=1e-8)
        _, g, _ = obj.value_grad_hess(x, hess=False)
        np.testing.assert_allclose(-np.asarray(grad) / n_h, g, rtol=1e-7, atol=1e-10)
