r"""Uniformity of SBC ranks: simultaneous ECDF bands and tests.

Under correct computation the ranks of one scalar over ``S`` simulations are iid
discrete uniform on ``0..L``.  Their ECDF at the grid ``r = 0..L-1`` (``z_r = (r + 1) /
(L + 1)``) has ``S F(z_r) ~ Binomial(S, z_r)`` pointwise.

* **Simultaneous 95% band** (Säilynoja, Bürkner & Vehtari 2022, "Graphical test for
  discrete uniformity and its applications in goodness-of-fit evaluation and multiple
  sample comparison", Statistics and Computing 32:32, Sec. 2.2, the *simulation*
  method): for ``n_null`` samples of ``S`` uniform ranks, the smallest pointwise
  two-sided binomial tail probability over the grid,
  ``T = min_r 2 min(P(X <= S F(z_r)), P(X >= S F(z_r)))``, ``X ~ Binomial(S, z_r)``;
  the adjusted pointwise level ``gamma`` is the ``alpha`` quantile of ``T``, and the
  band at ``z_r`` holds the counts whose pointwise tail probability exceeds ``gamma``.
  An ECDF leaves the band exactly when its ``T`` is at most ``gamma``; the p-value of
  the ECDF test is the share of null samples with ``T`` at most the observed one.
* **Kolmogorov-Smirnov-type** statistic ``D = max_r |F(z_r) - z_r|``, p-value from the
  same null samples.
* **Chi-square** test on ``B`` equal bins of the ``L + 1`` rank values (Talts et al.
  2018, Sec. 4.1; ``B`` divides ``L + 1`` and keeps at least 5 expected per bin).

Verdict of a configuration: the ECDF test at family-wise level ``alpha`` over its
scalars (Bonferroni): it fails when some scalar's p-value is below
``alpha / n_scalars``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["Envelope", "envelope", "ecdf_counts", "tail_statistic", "chi_square", "uniformity_table", "verdict",
           "ALPHA", "FAMILY_ALPHA"]

ALPHA = 0.05
"""Level of the simultaneous band (95%)."""
FAMILY_ALPHA = 0.01
"""Family-wise level of the verdict over the scalars of one configuration."""


def ecdf_counts(ranks: np.ndarray, L: int) -> np.ndarray:
    """Counts ``#{ranks <= r}`` for ``r = 0..L-1``, along the last axis of ``ranks`` (ints in ``0..L``)."""
    ranks = np.asarray(ranks, np.int64)
    lead = ranks.shape[:-1]
    flat = ranks.reshape(-1, ranks.shape[-1])
    offset = (L + 1) * np.arange(flat.shape[0])[:, None]
    hist = np.bincount((flat + offset).ravel(), minlength=flat.shape[0] * (L + 1)).reshape(flat.shape[0], L + 1)
    return hist.cumsum(axis=1)[:, :L].reshape(*lead, L)


def _grid(L: int) -> np.ndarray:
    return np.arange(1, L + 1) / (L + 1)


def tail_statistic(counts: np.ndarray, S: int, L: int) -> np.ndarray:
    """``min_r`` of the two-sided pointwise binomial tail probability of ECDF counts (last axis = grid)."""
    z = _grid(L)
    lo = stats.binom.cdf(counts, S, z)
    hi = stats.binom.sf(counts - 1, S, z)
    return np.minimum(1.0, 2.0 * np.minimum(lo, hi)).min(axis=-1)


@dataclass(frozen=True)
class Envelope:
    """The null distribution of ``S`` uniform ranks on ``0..L`` and the simultaneous band.

    Attributes
    ----------
    S, L : int
    gamma : float
        Adjusted pointwise level of the ``1 - alpha`` simultaneous band.
    lower, upper : ndarray
        Band on the ECDF counts at the grid ``z_r = (r + 1) / (L + 1)``, ``r = 0..L-1``.
    null_T, null_D : ndarray
        The tail statistic and the KS-type statistic of the null samples.
    """

    S: int
    L: int
    gamma: float
    lower: np.ndarray
    upper: np.ndarray
    null_T: np.ndarray
    null_D: np.ndarray

    @property
    def z(self) -> np.ndarray:
        """The ECDF grid ``(r + 1) / (L + 1)``."""
        return _grid(self.L)


@lru_cache(maxsize=16)
def envelope(S: int, L: int, alpha: float = ALPHA, n_null: int = 10_000, seed: int = 20220301) -> Envelope:
    """Simulate the ``1 - alpha`` simultaneous ECDF band of ``S`` ranks on ``0..L`` (Säilynoja et al. 2022, Sec. 2.2)."""
    rng = np.random.default_rng(seed)
    null = ecdf_counts(rng.integers(0, L + 1, size=(n_null, S)), L)
    T = tail_statistic(null, S, L)
    D = np.abs(null / S - _grid(L)).max(axis=1)
    gamma = float(np.quantile(T, alpha))
    c = np.arange(S + 1)[:, None]
    z = _grid(L)[None, :]
    inside = np.minimum(1.0, 2.0 * np.minimum(stats.binom.cdf(c, S, z), stats.binom.sf(c - 1, S, z))) > gamma
    lower = np.argmax(inside, axis=0)
    upper = S - np.argmax(inside[::-1], axis=0)
    return Envelope(S, L, gamma, lower, upper, T, D)


def chi_square(ranks: np.ndarray, L: int) -> tuple[float, float, int]:
    """Pearson chi-square test of uniform ranks on ``B`` equal bins; returns ``(statistic, p-value, B)``."""
    S = ranks.size
    B = max((b for b in range(1, 21) if (L + 1) % b == 0 and S / b >= 5), default=1)
    if B < 2:
        return float("nan"), float("nan"), B
    obs = np.bincount(np.asarray(ranks, np.int64) // ((L + 1) // B), minlength=B)
    res = stats.chisquare(obs)
    return float(res.statistic), float(res.pvalue), B


def uniformity_table(ranks: pd.DataFrame, L: int) -> pd.DataFrame:
    """Tests per scalar: one row per column of ``ranks`` (ints in ``0..L``, one row per simulation).

    Columns ``S``, ``ecdf_p`` (simultaneous-band test), ``outside_band`` (grid points
    outside the 95% band), ``ks_D`` and ``ks_p``, ``chi2``, ``chi2_p``, ``bins``, and
    ``mean_rank`` (expected ``L / 2``).
    """
    rows = []
    for name in ranks.columns:
        r = ranks[name].dropna().to_numpy(np.int64)
        env = envelope(r.size, L)
        cnt = ecdf_counts(r, L)
        T = float(tail_statistic(cnt, r.size, L))
        D = float(np.abs(cnt / r.size - env.z).max())
        chi2, chi2_p, B = chi_square(r, L)
        rows.append({
            "scalar": name, "S": r.size,
            "ecdf_p": (1 + np.sum(env.null_T <= T)) / (1 + env.null_T.size),
            "outside_band": int(np.sum((cnt < env.lower) | (cnt > env.upper))),
            "ks_D": D, "ks_p": (1 + np.sum(env.null_D >= D)) / (1 + env.null_D.size),
            "chi2": chi2, "chi2_p": chi2_p, "bins": B, "mean_rank": float(r.mean()),
        })
    return pd.DataFrame(rows).set_index("scalar")


def verdict(table: pd.DataFrame, family_alpha: float = FAMILY_ALPHA) -> tuple[bool, float]:
    """Return ``(calibrated, Bonferroni-adjusted smallest ECDF p-value)`` of a :func:`uniformity_table`."""
    adjusted = min(1.0, float(table["ecdf_p"].min()) * len(table))
    return adjusted >= family_alpha, adjusted
