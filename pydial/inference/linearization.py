r"""Inference for the DIAL estimators: the Wald tables, the two-step maps and target blocks of the linearizations.

The linearizations themselves are built in :mod:`pydial.inference.sandwich`, their meats in
:mod:`pydial.inference.meats` (re-exported here).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from pydial.exceptions import ConvergenceError, CovarianceWarning, IdentifiabilityError
from pydial.model.families import family_of
from pydial.inference.meats import (ANCHORED_COVS, CLUSTERED, COV_DESCRIPTIONS, COV_TYPES, CellStats, Linearization,
                                    Meat, MeatSource, check_cov_type, degenerate_meat, meat_covariance, parameter_meat)

__all__ = ["ANCHORED_COVS", "CLUSTERED", "COV_DESCRIPTIONS", "COV_TYPES", "CellStats", "Linearization", "Meat",
           "MeatSource", "check_cov_type", "degenerate_meat", "meat_covariance", "parameter_meat", "score_tables",
           "consensus_table", "position_effect_tables", "wald_table", "wald_frame", "tie_table",
           "zero_variance", "zero_variance_warning"]


def score_tables(s: np.ndarray, C: np.ndarray, items: tuple[str, ...], level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the Wald table ``score, se, ci_low, ci_high`` by item and the labelled covariance (ConvergenceError: not finite)."""
    if not np.all(np.isfinite(s)):
        raise ConvergenceError("the fit produced non-finite scores")
    tab = wald_table(s, C, list(items), level, "score")[["score", "se", "ci_low", "ci_high"]]
    tab.index.name = "item"
    return tab, pd.DataFrame(C, index=pd.Index(items, name="item"), columns=pd.Index(items, name="item"))


def consensus_table(gamma: np.ndarray, cov: np.ndarray, judges: Sequence[str], level: float) -> pd.DataFrame:
    """Consensus loadings ``gamma_k`` with Wald intervals (``gamma, se, ci_low, ci_high`` by judge)."""
    tab = wald_table(gamma, cov, list(judges), level, "gamma")[["gamma", "se", "ci_low", "ci_high"]]
    tab.index.name = "judge"
    return tab


def position_effect_tables(b: np.ndarray, cov: np.ndarray, judges: Sequence[str],
                           level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the judges' position effects: their Wald table (:func:`wald_table`) and judge x judge covariance."""
    tab = wald_table(b, cov, list(judges), level, "b")
    tab.index.name = "judge"
    return tab, pd.DataFrame(np.asarray(cov, float), index=tab.index, columns=tab.index.copy())


def wald_table(est: np.ndarray, cov: np.ndarray, index: list[str], level: float, name: str) -> pd.DataFrame:
    """``name, se, ci_low, ci_high, z, p_value`` for a vector estimate with covariance."""
    return wald_frame(est, np.diag(cov), index, level, name)


def zero_variance(var: np.ndarray) -> np.ndarray:
    """Return the (numerically) zero entries of the variances ``var``: NaN standard errors in a Wald table."""
    return np.isfinite(var) & (var <= 1e-13 * max(float(np.nanmax(np.abs(var), initial=0.0)), 1e-300))


def zero_variance_warning(name: str, index: Sequence[Any], zero: np.ndarray) -> CovarianceWarning:
    """Return the :class:`CovarianceWarning` of the zero variances ``zero`` of ``name`` (labels ``index``)."""
    who = ", ".join(str(index[k]) for k in np.flatnonzero(zero)[:6])
    return CovarianceWarning(f"the covariance of {name} has zero variance for {who} ({int(zero.sum())} in "
                             "all): their standard errors and intervals are NaN, not 0")


def wald_frame(est: np.ndarray, var: np.ndarray, index: list[str], level: float, name: str) -> pd.DataFrame:
    """Wald intervals and tests ``name, se, ci_low, ci_high, z, p_value``; a zero variance gives NaN and a CovarianceWarning."""
    est = np.asarray(est, float)
    var = np.asarray(var, float).copy()
    zero = zero_variance(var)
    if zero.any():
        warnings.warn(zero_variance_warning(name, index, zero), stacklevel=3)
        var = np.where(zero, np.nan, var)
    se = np.sqrt(np.clip(var, 0.0, None))
    zq = ndtri(0.5 + level / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = est / se
    return pd.DataFrame(
        {name: est, "se": se, "ci_low": est - zq * se, "ci_high": est + zq * se, "z": z, "p_value": 2 * ndtr(-np.abs(z))},
        index=pd.Index(index),
    )


# ====================================================== linearization pieces
def two_step_maps(S_xi: np.ndarray, S_c: np.ndarray, C: np.ndarray, H_c_xi: np.ndarray,
                  stage_two: str) -> tuple[np.ndarray, np.ndarray]:
    """Return the two-step delta method's maps ``(S_xi - S_c C^{-1} H_c_xi, S_c C^{-1})`` of a staged estimator.

    ``S_xi = dt/dxi``, ``S_c = dt/dc``, ``C = H_cc``, ``H_c_xi`` the stage-two Hessian blocks (eq.
    staged-calibrated-estimator); a singular ``C`` raises IdentifiabilityError naming ``stage_two``.
    """
    if np.linalg.matrix_rank(C) < C.shape[0]:
        raise IdentifiabilityError(f"the human calibration block is singular: the human comparisons do not identify "
                                   f"{stage_two} in the estimated basis (the human pairs' difference rows D_H "
                                   "need rank(D_H M) = d on the d-column calibration basis M)")
    Cinv = np.linalg.inv(C)
    return S_xi - S_c @ Cinv @ H_c_xi, S_c @ Cinv


def target_slices(N: int, rows: int, log_nu: int = 0) -> dict[str, slice]:
    """Return the blocks of the targets ``(s, log_nu rows of log nu, beta)``, ``rows`` in all (``Chart.target_jacobian``)."""
    nl = int(log_nu)
    return ({"scores": slice(0, N)} | ({"log_nu": slice(N, N + nl)} if nl else {})
            | ({"beta": slice(N + nl, rows)} if rows > N + nl else {}))


def tie_table(names: list[str], groups: np.ndarray, free: np.ndarray, log_nu: np.ndarray, var: np.ndarray,
              level: float, ties: str) -> pd.DataFrame:
    """Tabulate the tie parameter ``nu``/``tau, se, ci_low, ci_high`` by group (delta method, log-scale interval; 0: no ties)."""
    zq = ndtri(0.5 + level / 2)
    rows = []
    for g in groups:
        if g in free:
            t = int(np.flatnonzero(free == g)[0])
            l, se = float(log_nu[t]), float(np.sqrt(var[t])) if np.isfinite(var[t]) and var[t] >= 0 else np.nan
            nu = np.exp(l)
            rows.append((nu, nu * se, np.exp(l - zq * se), np.exp(l + zq * se)))
        else:
            rows.append((0.0, np.nan, np.nan, np.nan))
    tab = pd.DataFrame(rows, columns=[family_of(ties).label, "se", "ci_low", "ci_high"],
                       index=pd.Index([names[g] for g in groups], name="judge"))
    tab.attrs["model"] = ties
    return tab
