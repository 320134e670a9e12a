"""dial.stan with ties 1 / 2 agrees with the numpy tie objective and its optimum.

* log density: ``-(log_prob - weighted_log_coef)`` (flat priors, no Jacobian) equals
  ``n_H`` times :class:`pydial.model.likelihood.Objective` at random ``x = (theta, log nu)``
  (the chart's ``theta`` followed by ``log nu``, judges then people, mapped to the program's named
  parameters by :mod:`pydial.stan.parameters`)
  to 1e-8 relative, and the gradients agree;
* optimum: the numpy Newton fit of :math:`Q_\\lambda` at a fixed lambda and Stan's
  optimizer from the same (staged) start give the same scores, order effects and nu.
"""

from __future__ import annotations

import numpy as np
import pytest

import pydial
from pydial.estimation import steps
from pydial.model.likelihood import Objective, tie_totals
from pydial.model.chart import Chart
from pydial.model.families import DAVIDSON, family_of
from pydial.stan.parameters import dial_from_unconstrained as from_stan, dial_unconstrained as to_stan, optimize_dial
from pydial.stan.schema import dial_data, weighted_log_coef

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def tdata():
    return pydial.simulate(N=7, K=3, rank=1, n_llm=3000, n_human=500, tie_rate=0.2, ties="davidson",
                           seed=41).comparisons


CASES = [(ties, r, cal, order) for ties in ("davidson", "rao-kupper") for r in (0, 1) for cal in ("mu", "W", None)
         for order in (True, False) if not (cal == "W" and r == 0)]


@pytest.mark.parametrize("ties,r,cal,order", CASES)
def test_dial_tie_log_prob_equals_numpy_tie_objective(models, tdata, ties, r, cal, order):
    m = models["dial"]
    ch = Chart(tdata.N, tdata.K, r, cal, order)
    n_l, n_h = tie_totals(tdata)
    lam = 0.45
    if cal is None:
        obj = Objective.weighted(ch, tdata, np.inf, ties=ties)
        d, scale = dial_data(tdata, ch, w_llm=1.0, family=family_of(ties)), n_l
    else:
        obj = Objective.weighted(ch, tdata, lam, ties=ties)
        d, scale = dial_data(tdata, ch, w_llm=lam * n_h / n_l, w_human=1.0, family=family_of(ties)), n_h
    assert m.num_unconstrained(d) == obj.dim == ch.dim + tdata.K + (cal is not None)
    coef = weighted_log_coef(d)
    rng = np.random.default_rng(7 + r + 2 * order)
    for _ in range(3):
        x = rng.normal(scale=0.6, size=obj.dim)
        x[ch.dim:] = rng.normal(-0.7, 0.5, size=obj.n_tie)
        got = -(m.log_prob(d, to_stan(d, x)) - coef)
        assert got == pytest.approx(scale * obj.value(x), rel=1e-8)
        g = scale * obj.value_grad_hess(x, hess=False)[1]
        np.testing.assert_allclose(-from_stan(d, m.grad_log_prob(d, to_stan(d, x))), g, rtol=1e-7, atol=1e-9 * np.abs(g).max())


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_joint_tie_fit_matches_stan_optimizer(models, tdata, ties, stan_backend_name):
    m = models["dial"]
    sf = steps.staged_fit(tdata, 1, "mu", family=family_of(ties))
    ch = sf.chart
    n_l, n_h = tie_totals(tdata)
    lam = 1.5
    opt = steps.NUMPY.joint(tdata, family_of(ties), ch, lam, sf.x)
    x, obj = opt.x, Objective.weighted(ch, tdata, lam, ties=family_of(ties))
    assert opt.resolved
    d = dial_data(tdata, ch, w_llm=lam * n_h / n_l, w_human=1.0, family=family_of(ties))
    res = optimize_dial(m, d, sf.x, gtol=1e-12)
    u = np.asarray(res.u, float)
    tol = 1e-6
    np.testing.assert_allclose(ch.scores(u[: ch.dim]), ch.scores(x[: ch.dim]), atol=tol)
    np.testing.assert_allclose(ch.order_effects(u[: ch.dim]), ch.order_effects(x[: ch.dim]), atol=tol)
    np.testing.assert_allclose(np.exp(u[ch.dim:]), np.exp(x[ch.dim:]), atol=tol)
    # Stan's optimum is a stationary point of the numpy objective too
    assert np.abs(obj.value_grad_hess(u, hess=False)[1]).max() < 1e-6


@pytest.mark.parametrize("method,ties", [("dial-anc", "davidson"), ("dial-anc", "rao-kupper"),
                                         ("dial-ada", "davidson"), ("dial-nopos", "rao-kupper"), ("atc", "davidson"),
                                         ("pooled", "davidson"), ("pooled", "rao-kupper")])
def test_fit_engine_stan_with_ties_matches_numpy(models, tdata, method, ties, stan_backend_name):
    """engine="stan" optimizes every stage with dial.stan / judges.stan; numpy infers at the optimum."""
    a = pydial.fit(tdata, method, ties=ties)
    b = pydial.fit(tdata, method, ties=ties, engine="stan")
    assert b.status == "ok", b.problems
    np.testing.assert_equal(b.lambda_, a.lambda_)
    np.testing.assert_allclose(b.scores.to_numpy(), a.scores.to_numpy(), atol=1e-6)
    np.testing.assert_allclose(b.tie_parameters.to_numpy(), a.tie_parameters.to_numpy(), atol=1e-6)
    if a.position_effects is not None:
        np.testing.assert_allclose(b.position_effects["b"], a.position_effects["b"], atol=1e-6)
    if a.gacv is not None:
        np.testing.assert_allclose(b.gacv["gacv"], a.gacv["gacv"], rtol=1e-7)


@pytest.mark.parametrize("method", ["dial-anc", "dial-ada", "atc", "pooled"])
def test_engine_stan_with_groups_without_ties(models, method, stan_backend_name):
    """A judge and the people without any tie: Stan's dial.stan gets nu_zero for them (binary cells) and
    agrees with numpy, which fixes their nu at 0; their tie parameters are reported as 0."""
    f = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=600, tie_rate=0.2, seed=3).frame
    f = f.loc[~(f["judge"].isin(["judge0", "human"]) & (f["winner"] == "tie"))]
    data = pydial.Comparisons.from_frame(f, human_judge="human")
    a = pydial.fit(data, method, ties="davidson")
    b = pydial.fit(data, method, ties="davidson", engine="stan")
    assert b.status == "ok", b.problems
    np.testing.assert_allclose(b.scores.to_numpy(), a.scores.to_numpy(), atol=1e-6)
    np.testing.assert_allclose(b.tie_parameters.to_numpy(), a.tie_parameters.to_numpy(), atol=1e-6)
    assert b.tie_parameters.loc["human", "nu"] == 0
    if method != "pooled":  # pooled: one nu for all LLM judgments
        assert b.tie_parameters.loc["judge0", "nu"] == 0 and b.tie_parameters.loc["judge1", "nu"] > 0


def test_nu_zero_flags_groups_without_ties():
    """standata: nu_zero only with boundary_nu=True, and then exactly for the groups without a tie."""
    f = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=600, tie_rate=0.2, seed=3).frame
    f = f.loc[~((f["judge"] == "judge2") & (f["winner"] == "tie"))]
    data = pydial.Comparisons.from_frame(f, human_judge="human")
    ch = Chart(data.N, data.K, 1, "mu", True)
    assert list(dial_data(data, ch, w_llm=1.0, w_human=1.0, family=DAVIDSON)["nu_zero"]) == [0, 0, 0, 0]
    d = dial_data(data, ch, w_llm=1.0, w_human=1.0, family=DAVIDSON, boundary_nu=True)
    assert list(d["nu_zero"]) == [0, 0, 1, 0]
