"""Simulation-based calibration (analyses/sbc) in reduced form, and its building blocks.

The reduced SBC runs the code of ``python -m analyses.sbc run`` on 30 simulations of
``judges.stan`` (binary, 3 items, one judge, people) and fails when the ranks of the
identified scalars are far from uniform (the verdict of
:func:`analyses.sbc.uniformity.verdict`: simultaneous ECDF-band test, Bonferroni over
the scalars at family-wise level 0.01).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # analyses/ lives beside tests/, not in the installed package
    sys.path.insert(0, str(ROOT))

from analyses.sbc.configs import CONFIGS, QUICK  # noqa: E402
from analyses.sbc.fit import NutsSettings  # noqa: E402
from analyses.sbc.priors import draw_prior  # noqa: E402
from analyses.sbc.ranks import rank_columns, run  # noqa: E402
from analyses.sbc.simulate import outcome_probabilities  # noqa: E402
from analyses.sbc.uniformity import ecdf_counts, envelope, uniformity_table, verdict  # noqa: E402

REDUCED_SIMS = 30


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c.kind == "dial_sample"], ids=lambda c: c.name)
def test_dial_prior_draws_have_the_stated_structure(cfg):
    """The prior sampler's S = gamma mu' + U V' meets Cond. llm-structure and s_H lies in col(M)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        th = draw_prior(rng, cfg)
        S, mu, V, gamma = th["S"], th["mu"], th["V"], th["gamma"]
        N = mu.size
        assert abs(mu.sum()) < 1e-10 and np.isclose(mu @ mu, N)
        assert np.allclose(V.T @ np.column_stack([np.ones(N), mu]), 0, atol=1e-10) and np.allclose(V.T @ V, N)
        assert np.allclose(S.mean(axis=0), gamma.mean() * mu) and gamma.mean() > 0
        assert np.allclose(S.sum(axis=1), 0, atol=1e-10)
        M = mu[:, None] if cfg.calibration == "mu" else np.column_stack([mu, V])
        assert np.allclose(M @ th["c"], th["s_H"])


def test_disagreement_norm_is_that_of_u_v():
    """The test quantity is ||U V'||_F of the prior draw, for one draw and for draws: with V'V = N I and
    mu'V = 0, U V' = S V V' / N, so ||U V'||_F = ||S V||_F / sqrt(N) (no gamma or mu needed)."""
    from analyses.sbc.quantities import identified

    cfg = next(c for c in CONFIGS if c.kind == "dial_sample")
    rng = np.random.default_rng(3)
    draws = [draw_prior(rng, cfg) for _ in range(6)]
    want = [np.linalg.norm(d["S"] @ d["V"]) / np.sqrt(d["mu"].size) for d in draws]
    assert identified(draws[0])["disagreement_norm"] == pytest.approx(want[0], rel=1e-12)
    stacked = {k: np.stack([d[k] for d in draws]).reshape(2, 3, *np.shape(draws[0][k])) for k in ("S", "gamma", "mu")}
    got = identified(stacked, ndim_draws=2)["disagreement_norm"]
    np.testing.assert_allclose(got.ravel(), want, rtol=1e-12)


def test_tie_probabilities_reduce_to_the_binary_model():
    """Given a decisive outcome, both tie models have logit P(first) = eta; as nu -> 0 they are binary."""
    eta = np.linspace(-3, 3, 7)
    binary = outcome_probabilities(eta, None, 0.0)
    dav = outcome_probabilities(eta, "davidson", 0.7)
    assert np.allclose(np.log(dav[:, 0] / dav[:, 1]), eta)
    for ties in ("davidson", "rao-kupper"):
        p = outcome_probabilities(eta, ties, 1e-9)
        assert np.allclose(p, binary, atol=1e-8) and np.allclose(p.sum(axis=1), 1)


def test_simultaneous_band_has_its_level():
    """About 5% of samples of uniform ranks leave the simulated 95% band (Säilynoja et al. 2022)."""
    env = envelope(200, 99)
    x = np.random.default_rng(1).integers(0, 100, size=(4000, 200))
    c = ecdf_counts(x, 99)
    outside = np.mean(((c < env.lower) | (c > env.upper)).any(axis=1))
    assert 0.03 < outside <= 0.06


@pytest.mark.slow
@pytest.mark.stan
def test_reduced_sbc_of_judges_binary(stan_backend_name):
    """30 simulations of judges.stan (binary): the ranks of S, s_H and b are uniform, and no fit diverges."""
    settings = NutsSettings()
    df = run([QUICK], REDUCED_SIMS, jobs=1, settings=settings, verbose=False)[QUICK.name]
    assert (df["error"] == "").all(), df["error"].unique()
    table = uniformity_table(df[rank_columns(df)], settings.kept)
    assert set(table.index) == {"S[1,1]", "S[1,2]", "S[1,3]", "s_H[1]", "s_H[2]", "s_H[3]", "b[1]"}
    calibrated, adjusted = verdict(table)
    assert calibrated, f"SBC ranks far from uniform (Bonferroni p = {adjusted:.3g}):\n{table}"
    assert df["divergent"].sum() == 0
