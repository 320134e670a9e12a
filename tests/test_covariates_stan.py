"""Response covariates in the Stan programs: the covariate term ``z' beta`` of the shared cell likelihood.

* Every program's log density with covariates equals an independent computation: the numpy
  engine's objective (``dial.stan``, value and gradient at random ``theta`` including ``beta``) and
  the per-cell log pmf of :mod:`pydial.model.families` at ``eta = s_i - s_j + a b + z' beta`` formed
  by hand (``judges.stan``, ``dial_sample.stan``, ``dial_calibrate.stan``, the calibration stage).
* ``fit(..., engine="stan")`` equals ``engine="numpy"`` to 1e-6 on scores, ``b`` and ``beta`` for
  every method that takes covariates, on both backends.
* The posterior of every program takes covariates: ``beta`` is in the InferenceData with its
  labels, and ``compare_intervals`` sets its intervals beside the sandwich ones.
"""

from __future__ import annotations

import numpy as np
import pytest

import pydial
from pydial.model.chart import Chart
from pydial.model.families import FAMILIES, family_of, log_coef
from pydial.model.likelihood import Objective
from pydial.stan.parameters import dial_from_unconstrained as from_stan, dial_unconstrained as to_stan
from pydial.stan.schema import (
    dial_calibrate_data,
    dial_data,
    dial_sample_data,
    helmert_basis,
    judges_data,
    weighted_log_coef,
)

pytestmark = pytest.mark.stan

COVARIATES = ["length", "lists"]


def simulated(ties: str | None = None, seed: int = 1, **kw) -> pydial.Comparisons:
    args = dict(N=6, K=3, n_llm=3000, n_human=600, covariates=COVARIATES, beta=0.4, seed=seed) | kw
    if ties:
        args |= dict(tie_rate=0.1, ties=ties)
    return pydial.simulate(**args).comparisons


def loglik(counts: np.ndarray, eta: np.ndarray, ties: str | None, log_nu=0.0) -> np.ndarray:
    """Log pmf per cell from pydial.model.families (kernel + multinomial coefficient)."""
    return log_coef(counts) + FAMILIES[ties].cell(counts, eta, log_nu).value


# ------------------------------------------------------------------ dial.stan
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("cal,ties", [(None, None), ("mu", None), ("W", None), ("W", "davidson"), (None, "rao-kupper")])
def test_dial_log_prob_with_covariates_equals_numpy_objective(models, shared, cal, ties):
    data = simulated(ties)
    m = models["dial"]
    ch = Chart.for_data(data, 1, cal, True, shared)
    lam = np.inf if cal is None else 0.7
    obj = Objective.weighted(ch, data, lam, ties=ties)
    n_l, n_h = obj.cells.n[~obj.cells.is_human].sum(), obj.cells.n[obj.cells.is_human].sum()
    if cal is None:
        d, scale = dial_data(data, ch, w_llm=1.0, family=family_of(ties)), n_l
    else:
        d, scale = dial_data(data, ch, w_llm=lam * n_h / n_l, w_human=1.0, family=family_of(ties)), n_h
    assert d["n_cov"] == 2 and m.num_unconstrained(d) == obj.dim
    coef = weighted_log_coef(d)
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = rng.normal(scale=0.4, size=obj.dim)
        assert np.abs(x[ch.slices["beta"]]).max() > 0.1
        assert -(m.log_prob(d, to_stan(d, x)) - coef) == pytest.approx(scale * obj.value(x), rel=1e-9)
        _, g, _ = obj.value_grad_hess(x, hess=False)
        np.testing.assert_allclose(-from_stan(d, m.grad_log_prob(d, to_stan(d, x))), scale * g, rtol=1e-7, atol=1e-8 * np.abs(scale * g).max())


def test_dial_calibration_stage_is_the_people_glm_with_covariates(models):
    """fix_llm: the parameters are (c, beta_H); the target is the people's log-likelihood at s = M c, z' beta_H."""
    data = simulated()
    m = models["dial"]
    ch = Chart.for_data(data, 1, "W", True)
    rng = np.random.default_rng(3)
    theta = rng.normal(scale=0.4, size=ch.dim)
    d = dial_data(data, ch, w_llm=0.0, w_human=1.0, fix_llm=theta)
    people = ch.human_coordinates
    assert m.num_unconstrained(d) == people.size == ch.d + data.p
    u = rng.normal(scale=0.4, size=people.size)
    th = theta.copy()
    th[people] = u
    H = data.cell_table("human")
    s, beta_h = ch.scores(th), ch.human_effects(th)
    expected = loglik(H.counts, s[H.i] - s[H.j] + H.z @ beta_h, None).sum()
    assert m.log_prob(d, to_stan(d, u)) == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------------------ judges.stan
@pytest.mark.parametrize("ties", [None, "davidson"])
def test_judges_log_prob_with_covariates_equals_numpy_cells(models, ties):
    data = simulated(ties, seed=2)
    m = models["judges"]
    tie = ties is not None
    L, H = data.cell_table("llm", with_ties=tie), data.cell_table("human", with_ties=tie)
    K, N = data.K, data.N
    d = judges_data(L, H, N=N, K=K, family=family_of(ties), flat=True)
    assert list(d["beta_row"]) == [1, 2, 3, 4] and d["cell_z"].shape == (len(L), 2)
    Q = helmert_basis(N)
    rng = np.random.default_rng(6)
    u = rng.normal(scale=0.5, size=m.num_unconstrained(d))
    v = m.constrain(d, u, include_gqs=True)
    S, s_H = np.asarray(v["s_raw"]).reshape(K, N - 1) @ Q.T, Q @ v["sH_raw"]
    beta = np.asarray(v["beta_free"]).reshape(K + 1, 2)
    np.testing.assert_allclose(np.asarray(v["beta"]).reshape(K + 1, 2), beta)
    ln = np.atleast_1d(v["log_nu"]) if ties else np.zeros(K + 1)
    ll = loglik(L.counts, S[L.judge, L.i] - S[L.judge, L.j] + L.a * v["b"][L.judge] + np.sum(L.z * beta[L.judge], 1),
                ties, ln[L.judge])
    lh = loglik(H.counts, s_H[H.i] - s_H[H.j] + H.z @ beta[K], ties, ln[K])
    assert m.log_prob(d, u) == pytest.approx(ll.sum() + lh.sum(), rel=1e-10)
    np.testing.assert_allclose(v["log_lik"], np.concatenate([ll, lh]), rtol=1e-10)


# ------------------------------------------------------------------ dial_sample.stan
@pytest.mark.parametrize("shared,ties", [(False, None), (True, "davidson")])
def test_dial_sample_log_lik_with_covariates(models, shared, ties):
    data = simulated(ties, seed=3, N=7)
    m = models["dial_sample"]
    priors = {"m_sd": 0, "gamma_sd": 0, "Z_sd": 0, "b_sd": 0, "c_sd": 0, "log_nu_sd": 0, "beta_sd": 0.5}
    d, L, H = dial_sample_data(data, rank=1, calibration="W", family=family_of(ties), priors=priors, shared=shared)
    K = data.K
    rows = np.append(np.zeros(K, int) if shared else np.arange(K), 1 if shared else K)
    assert list(d["beta_row"]) == list(rows + 1)
    rng = np.random.default_rng(7)
    u = rng.normal(size=m.num_unconstrained(d))
    v = m.constrain(d, u, include_gqs=True)
    beta = np.asarray(v["beta_free"]).reshape(-1, 2)
    assert beta.shape[0] == rows.max() + 1
    ln = np.atleast_1d(v["log_nu"]) if ties else np.zeros(K + 1)
    S, s_H = v["S"], v["s_H"]
    ll = loglik(L.counts, S[L.judge, L.i] - S[L.judge, L.j] + L.a * v["b"][L.judge] + np.sum(L.z * beta[rows[L.judge]], 1),
                ties, ln[L.judge])
    lh = loglik(H.counts, s_H[H.i] - s_H[H.j] + H.z @ beta[rows[K]], ties, ln[K])
    np.testing.assert_allclose(v["log_lik"], np.concatenate([ll, lh]), rtol=1e-10)
    # the model block: log-likelihood, the parameter expansion of P and the normal prior on beta
    P_raw = np.asarray(v["P_raw"]).reshape(K - 1, 1)
    pe = -0.5 * np.sum((P_raw.T @ P_raw - 1.0) ** 2) / 0.2**2
    prior = np.sum(-0.5 * (beta / 0.5) ** 2 - np.log(0.5 * np.sqrt(2 * np.pi)))
    assert m.log_prob(d, u) == pytest.approx(ll.sum() + lh.sum() + pe + prior, rel=1e-10)


# ------------------------------------------------------------------ dial_calibrate.stan
@pytest.mark.parametrize("ties", [None, "davidson"])
def test_dial_calibrate_log_prob_with_covariates(models, ties):
    data = simulated(ties, seed=4)
    m = models["dial_calibrate"]
    H = data.cell_table("human", with_ties=ties is not None)
    rng = np.random.default_rng(5)
    T, dim = 3, 2
    M = rng.normal(size=(T, data.N, dim))
    d = dial_calibrate_data(H, M, family=family_of(ties), priors={"c_sd": 0, "log_nu_sd": 0, "beta_sd": 0})
    u = rng.normal(size=m.num_unconstrained(d))
    v = m.constrain(d, u, include_gqs=True)
    c, beta = np.asarray(v["c"]).reshape(T, dim), np.asarray(v["beta"]).reshape(T, 2)
    ln = np.atleast_1d(v["log_nu"]) if ties else np.zeros(T)
    ll = np.stack([loglik(H.counts, (M[t] @ c[t])[H.i] - (M[t] @ c[t])[H.j] + H.z @ beta[t], ties, ln[t])
                   for t in range(T)])
    np.testing.assert_allclose(v["log_lik"], ll, rtol=1e-10)
    assert m.log_prob(d, u) == pytest.approx(float(ll.sum()), rel=1e-10)


# ------------------------------------------------------------------ fit(..., engine="stan")
FIT_CASES = [
    ("dial-anc", None, "judge"),
    ("dial-ada", None, "judge"),
    ("dial-ada", "davidson", "shared"),
    ("dial-nopos", "rao-kupper", "judge"),
    ("atc", None, "judge"),
    ("pooled", "davidson", "judge"),
    ("human", "davidson", "judge"),
    ("judges", None, "judge"),
    ("judges", "davidson", "judge"),
]


@pytest.fixture(scope="module")
def fit_data():
    return {ties: simulated(ties, seed=9, N=8) for ties in (None, "davidson", "rao-kupper")}


@pytest.mark.parametrize("method,ties,effects", FIT_CASES)
def test_stan_engine_matches_numpy_with_covariates(models, stan_backend_name, fit_data, method, ties, effects):
    data = fit_data[ties]
    kw = dict(ties=ties, covariate_effects=effects) | ({"rank": 1} if method not in ("human", "judges") else {})
    a = pydial.fit(data, method, **kw)
    b = pydial.fit(data, method, engine="stan", **kw)
    np.testing.assert_allclose(b.scores["score"], a.scores["score"], atol=1e-6)
    if "b" in a.judges:
        np.testing.assert_allclose(b.judges["b"], a.judges["b"], atol=1e-6)
    ca, cb = a.covariate_effects, b.covariate_effects
    assert list(ca.index) == list(cb.index) and len(ca) >= 2
    np.testing.assert_allclose(cb["beta"], ca["beta"], atol=1e-6)
    np.testing.assert_allclose(cb["se"], ca["se"], rtol=1e-5)


# ------------------------------------------------------------------ posteriors
BETA = np.array([[0.6, 0.2], [0.3, 0.0], [0.0, -0.3], [0.1, 0.0]])  # three judges, then the people


@pytest.fixture(scope="module")
def posterior_data():
    # with continuous covariates every judgment is its own cell (and the cut posterior's second stage
    # replicates the human cells per draw): a few thousand judgments keep NUTS quick
    return pydial.simulate(N=6, K=3, n_llm=2_500, n_human=400, covariates=COVARIATES, beta=BETA, seed=12).comparisons


@pytest.mark.parametrize("method,effects", [("dial-ada", "shared"), ("dial-anc", "judge"), ("judges", "judge")])
def test_posterior_with_covariates_has_beta_near_the_mle(posterior_data, method, effects):
    """The posterior's beta sits on the sandwich estimate, labelled as the fit's rows (the effects differ by row).

    The default backend only: the layout of the draws is the backends' common code (both backends' log
    densities with covariates are checked above).
    """
    data = posterior_data
    kw = {"rank": 1} if method != "judges" else {}
    res = pydial.fit(data, method, covariate_effects=effects, cov_type="binomial", **kw)
    # the cut posterior (dial-anc) runs its second stage once per draw: fewer draws
    n = 60 if method == "dial-anc" else 200
    idata = pydial.stan.posterior(data, like=res, chains=2, draws=n, warmup=n, seed=3)
    from pydial.stan import idata as azio

    post = azio.group_dataset(idata, "posterior")
    assert post["beta"].dims[2:] == ("beta_judge", "covariate")
    assert list(post["covariate"].values) == COVARIATES
    assert pydial.stan.estimand(idata).spec.covariate_effects == effects
    table = pydial.stan.compare_intervals(res, idata)
    beta = table.xs("beta", level="quantity")
    assert list(beta.index) == [f"{j} | {c}" for j, c in res.covariate_effects.index]
    # posterior and sandwich agree up to Monte Carlo noise and the prior (a row-label mix-up shifts by several se)
    assert np.abs(beta["shift_se"]).max() < 0.6
    if method != "dial-ada":  # a power posterior's width is not the weighted fit's sandwich width
        assert beta["width_ratio"].between(0.6, 1.6).all()


@pytest.mark.parametrize("method,ties", [("dial-anc", None), ("dial-ada", None), ("dial-anc", "davidson"),
                                         ("pooled", None), ("judges", None)])
def test_stan_engine_matches_numpy_with_covariates_and_firth(models, stan_backend_name, fit_data, method, ties):
    """Firth's estimates with covariates: the Jeffreys prior of the whole design ([D_H M, Z_H] for the people)."""
    data = fit_data[ties]
    kw = dict(ties=ties, penalty="firth") | ({"rank": 1} if method in ("dial-anc", "dial-ada") else {})
    a = pydial.fit(data, method, **kw)
    b = pydial.fit(data, method, engine="stan", **kw)
    np.testing.assert_allclose(b.scores["score"], a.scores["score"], atol=1e-6)
    np.testing.assert_allclose(b.covariate_effects["beta"], a.covariate_effects["beta"], atol=1e-6)
    plain = pydial.fit(data, method, **(kw | {"penalty": None}))
    assert np.abs(a.covariate_effects["beta"] - plain.covariate_effects["beta"]).max() > 1e-6  # the prior acts


# ------------------------------------------------------------------ self-preference: effects fixed at 0
@pytest.fixture(scope="module")
def self_data():
    own = {"judge0": ["item00", "item01"], "judge2": ["item05"]}
    return pydial.simulate(N=8, K=4, rank=1, n_llm=6000, n_human=1000, seed=4, covariates=["length"], beta=0.3,
                           behavior=dict(self_preference=own, self_effect={"judge0": 0.6, "judge2": -0.4})).comparisons


def test_dial_log_prob_with_fixed_effects_equals_numpy(models, self_data):
    """The people's and the unmapped judges' self-preference effects are fixed at 0: beta_free holds the others."""
    data = self_data
    ch = Chart.for_data(data, 1, "W", True)
    assert ch.fixed is not None and ch.sizes["beta"] < ch.beta_rows * ch.p
    d = dial_data(data, ch, w_llm=0.5 * data.n_human / data.n_llm, w_human=1.0)
    assert int(np.sum(d["beta_fixed"])) == ch.beta_rows * ch.p - ch.sizes["beta"]
    obj = Objective.weighted(ch, data, 0.5)
    m = models["dial"]
    assert m.num_unconstrained(d) == ch.dim
    x = np.random.default_rng(1).normal(scale=0.4, size=ch.dim)
    assert -(m.log_prob(d, to_stan(d, x)) - weighted_log_coef(d)) == pytest.approx(data.n_human * obj.value(x), rel=1e-9)
    v = m.constrain(d, to_stan(d, x))
    np.testing.assert_allclose(np.asarray(v["beta"]).reshape(ch.beta_rows, ch.p), ch.covariate_effects(x), atol=1e-14)


@pytest.mark.parametrize("method", ["dial-anc", "dial-ada", "pooled"])
def test_stan_engine_matches_numpy_with_self_preference(models, stan_backend_name, self_data, method):
    kw = {"rank": 1} if method != "pooled" else {}
    a = pydial.fit(self_data, method, **kw)
    b = pydial.fit(self_data, method, engine="stan", **kw)
    assert list(b.covariate_effects.index) == list(a.covariate_effects.index)
    np.testing.assert_allclose(b.scores["score"], a.scores["score"], atol=1e-6)
    np.testing.assert_allclose(b.covariate_effects["beta"], a.covariate_effects["beta"], atol=1e-6)


def test_stan_point_fit_of_the_people_with_a_fixed_effect(models, self_data):
    """judges.stan holds the people's self-preference at 0 (beta_fixed): beta_H equals the people's GLM on length."""
    from pydial.stan.point import stan_fit_point

    sp = stan_fit_point(self_data, "human", backend=models["judges"].backend)
    ref = pydial.fit(self_data, "human").covariate_effects
    assert sp.beta is not None and sp.beta.shape == (1, 2)
    assert sp.beta[0, list(self_data.covariates).index("self_preference")] == 0.0
    np.testing.assert_allclose(sp.beta[0, 0], ref.loc[("human", "length"), "beta"], atol=1e-6)
