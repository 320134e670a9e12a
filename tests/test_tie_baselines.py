"""The baselines with ties: ``fit(data, "pooled" | "atc", ties=...)``.

References: without ties the tie fits are the binary fits (their own, separately
written linearization for ``pooled``); the cross derivative of the two-step
sandwich against central differences; the sandwich standard errors against the
spread of the estimates over simulated replicates; ``nu`` against the truth.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pydial.model.families import family_of
from pydial import fit
from pydial.model.likelihood import Cells, tie_totals
from pydial.studies.simulate import simulate
from pydial.inference.pooled import POOLED_LABEL, pooled_cross_derivative
from pydial.model.glm import FamilyGLM
from pydial.model.design import Design
from pydial.model.chart import centering_basis
from pydial.model.chart import difference_design


@pytest.fixture(scope="module")
def tied():
    return simulate(N=5, K=3, rank=1, n_llm=6000, n_human=1500, seed=1, tie_rate=0.25)


@pytest.fixture(scope="module")
def untied():
    return simulate(N=5, K=3, rank=1, n_llm=6000, n_human=1500, seed=2).comparisons


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
@pytest.mark.parametrize("cov", ["cell", "binomial", "record"])
def test_pooled_without_ties_is_binary_pooled(untied, ties, cov):
    a, b = fit(untied, "pooled", cov_type=cov), fit(untied, "pooled", cov_type=cov, ties=ties)
    np.testing.assert_allclose(b.scores.to_numpy(), a.scores.to_numpy(), atol=1e-8)
    np.testing.assert_allclose(b.cov.to_numpy(), a.cov.to_numpy(), atol=1e-10)
    assert b.tie_parameters[family_of(ties).label].eq(0).all()


def test_atc_without_ties_is_binary_atc(untied):
    a, b = fit(untied, "atc"), fit(untied, "atc", ties="davidson")
    np.testing.assert_allclose(b.scores["score"], a.scores["score"], atol=1e-8)
    np.testing.assert_allclose(b.position_effects.to_numpy(), a.position_effects.to_numpy(), atol=1e-6)


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_cross_derivative_by_differences(tied, ties):
    data = tied.comparisons
    N = data.N
    Hc = Cells.stack(data, 0.0, 1.0, with_ties=True)
    w = 1.0 / tie_totals(data)[1]
    rng = np.random.default_rng(0)
    beta, x2 = rng.normal(size=N - 1) * 0.5, np.array([0.8, np.log(0.4)])
    T = centering_basis(N)

    def psi(bt):
        X = Design(difference_design(Hc.i, Hc.j, N), (T @ bt)[:, None])
        return FamilyGLM(ties, Hc.counts, X, w).terms(x2)[1]

    h = 1e-6
    fd = np.column_stack([(psi(beta + h * e) - psi(beta - h * e)) / (2 * h) for e in np.eye(N - 1)])
    G = pooled_cross_derivative(family_of(ties), Hc, N, beta, x2, w)
    np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-9)


def test_pooled_sandwich_matches_bootstrap_spread():
    """300 stratified bootstrap replicates (LLM and human rows resampled separately, each row its
    own record): the record-sandwich se of each score and of each log nu is within 15% of the
    standard deviation of the bootstrap estimates."""
    from pydial import Comparisons

    sim = simulate(N=4, K=2, rank=1, n_llm=3000, n_human=800, seed=11, tie_rate=0.3)
    res = fit(sim.comparisons, "pooled", ties="davidson", cov_type="record")
    f = sim.frame
    hum = (f["judge"] == "human").to_numpy()
    rng = np.random.default_rng(5)
    est, lnu = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(300):
            rows = np.concatenate([rng.choice(np.flatnonzero(m), m.sum()) for m in (hum, ~hum)])
            d = Comparisons.from_frame(f.iloc[rows].assign(record_id=np.arange(rows.size)), human_judge="human",
                                       items=list(sim.truth.items))
            b = fit(d, "pooled", ties="davidson", cov_type="cell", check=False)
            est.append(b.scores["score"].to_numpy())
            lnu.append(np.log(b.tie_parameters["nu"].to_numpy()))
    t = res.tie_parameters
    ratio = res.scores["se"].to_numpy() / np.std(est, axis=0, ddof=1)
    assert np.all(np.abs(ratio - 1) < 0.15), ratio
    ratio_nu = (t["se"] / t["nu"]).to_numpy() / np.std(lnu, axis=0, ddof=1)
    assert np.all(np.abs(ratio_nu - 1) < 0.15), ratio_nu


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_pooled_tie_parameters(tied, ties):
    sim = simulate(N=5, K=3, rank=1, n_llm=20000, n_human=4000, seed=3, tie_rate=0.25, ties=ties)
    res = fit(sim.comparisons, "pooled", ties=ties)
    t = res.tie_parameters
    assert list(t.index) == [POOLED_LABEL, "human"] and t.attrs["model"] == ties
    # the people's nu_H covers the truth (4 se); the pooled judges' nu_L is that of a misspecified
    # model (judge and position effects ignored), so only its interval's consistency is checked
    name = family_of(ties).label
    assert abs(t.loc["human", name] - sim.truth.nu[-1]) < 4 * t.loc["human", "se"], (t, sim.truth.nu)
    assert np.all((t["ci_low"] < t[name]) & (t[name] < t["ci_high"]))
    assert res.ok


def test_atc_with_ties(tied):
    data = tied.comparisons
    res = fit(data, "atc", ties="davidson")
    anc = fit(data, "dial-anc", ties="davidson")
    # the judges' tables come from the same LLM-only tie fit as DIAL-Anc's
    np.testing.assert_allclose(res.position_effects.to_numpy(), anc.position_effects.to_numpy(), atol=1e-10)
    np.testing.assert_allclose(res.tie_parameters.loc[list(data.judges)].to_numpy(),
                               anc.tie_parameters.loc[list(data.judges)].to_numpy(), atol=1e-10)
    # scores are monotone in the people's tie-model ordering
    order = np.argsort(-res.stage_scores["human"].to_numpy())
    assert np.all(np.diff(res.scores["score"].to_numpy()[order]) <= 1e-12)
    t = res.tie_parameters.loc["human"]
    assert abs(np.log(t["nu"]) - np.log(tied.truth.nu[-1])) < 4 * t["se"] / t["nu"]
