r"""Inference for the DIAL estimators: the linearization (bread) of each fit and the Wald tables.

Influence ``u_c = A j_c`` of binary cells; the meats are in :mod:`pydial.inference.meats` (re-exported here).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from pydial.cache import derived
from pydial.data.comparisons import Comparisons
from pydial.exceptions import ConvergenceError, CovarianceWarning, IdentifiabilityError
from pydial.model.chart import Chart, consensus_gamma
from pydial.model.families import family_of
from pydial.model.likelihood import Cells, Objective
from pydial.model.cells import CellJacobian
from pydial.inference.meats import (ANCHORED_COVS, CLUSTERED, COV_DESCRIPTIONS, COV_TYPES, CellStats, Influence, Linearization,
                                    Meat, MeatSource, as_sparse, check_cov_type, degenerate_meat, influence_covariance,
                                    linearize, meat_covariance, parameter_meat, stack_influence)
from pydial.optim import pinv_sym

__all__ = ["ANCHORED_COVS", "CLUSTERED", "COV_DESCRIPTIONS", "COV_TYPES", "CellStats", "Influence", "Linearization", "Meat",
           "MeatSource", "check_cov_type", "degenerate_meat", "influence_covariance",
           "linearize", "meat_covariance", "parameter_meat", "stack_influence", "score_tables",
           "consensus_table", "position_effect_tables", "wald_table", "wald_frame", "tie_table",
           "zero_variance", "zero_variance_warning"]


def score_tables(s: np.ndarray, C: np.ndarray, items: tuple[str, ...], level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the Wald table ``score, se, ci_low, ci_high`` by item and the labelled covariance (ConvergenceError: not finite)."""
    if not np.all(np.isfinite(s)):
        raise ConvergenceError("the fit produced non-finite scores")
    tab = wald_table(s, C, list(items), level, "score")[["score", "se", "ci_low", "ci_high"]]
    tab.index.name = "item"
    cov = pd.DataFrame(C, index=pd.Index(items, name="item"), columns=pd.Index(items, name="item"))
    return tab, cov


def consensus_table(gamma: np.ndarray, cov: np.ndarray, judges: Sequence[str], level: float) -> pd.DataFrame:
    """Consensus loadings ``gamma_k`` with Wald intervals (``gamma, se, ci_low, ci_high`` by judge)."""
    tab = wald_table(gamma, cov, list(judges), level, "gamma")[["gamma", "se", "ci_low", "ci_high"]]
    tab.index.name = "judge"
    return tab


def position_effect_tables(b: np.ndarray, cov: np.ndarray, judges: Sequence[str],
                           level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the judges' position effects: their Wald table (:func:`wald_table`) and judge x judge covariance."""
    idx = pd.Index(list(judges), name="judge")
    tab = wald_table(b, cov, list(judges), level, "b")
    tab.index = idx
    return tab, pd.DataFrame(np.asarray(cov, float), index=idx, columns=idx.copy())


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
    zq = norm.ppf(0.5 + level / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = est / se
    return pd.DataFrame(
        {name: est, "se": se, "ci_low": est - zq * se, "ci_high": est + zq * se, "z": z, "p_value": 2 * norm.sf(np.abs(z))},
        index=pd.Index(index),
    )


# ===================================================================== breads
def objective_influence(obj: Objective, theta: np.ndarray, A: np.ndarray, coords: slice | np.ndarray = slice(None)
                        ) -> Influence:
    """Influence ``u_c = A d eta_c / d theta[coords]``, factored as ``J = d eta / d phi`` and ``A T[:, coords]^T``."""
    Tc = obj.chart.T_sparse[:, coords]
    return Influence(CellJacobian(obj, np.asarray(theta, float)), np.asarray(Tc @ np.asarray(A).T).T)


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


def staged_linearization(data: Comparisons, fit_: Any) -> Linearization:
    """Two-step linearization of the calibrated scores at the staged endpoint (Alg. DIAL-Anc).

    LLM cells ``u = (ds/dxi - ds/dc C^{-1} H_c_xi) H_xi^+ d eta/d xi`` (first; their columns of ``A`` are
    the ``stage_one`` that ``"fixed-basis"`` drops), human cells ``u = ds/dc C^{-1} d eta/dc``.
    """
    ch, th = fit_.chart, fit_.theta
    oL = Objective(ch, Cells.stack(data, 1.0 / data.n_llm, 0.0))
    oH = Objective(ch, Cells.stack(data, 0.0, 1.0 / data.n_human))
    cs, xi = ch.human_coordinates, ch.llm_coordinates
    # H_xi of l_L is the LLM-only fit's Hessian when that fit ends at the staged fit's coordinates (staged_fit)
    HL = fit_.llm_opt.hess_at(th[xi]) if fit_.llm_opt is not None else None
    HL = oL.value_grad_hess(th)[2][np.ix_(xi, xi)] if HL is None else HL
    _, _, HH = oH.value_grad_hess(th)
    sdot = ch.target_jacobian(th)
    total, A_H = two_step_maps(sdot[:, xi], sdot[:, cs], HH[np.ix_(cs, cs)], HH[np.ix_(cs, xi)], "c_H")
    HLp, _ = pinv_sym(HL, gauge=ch.gauge_directions(th)[xi])
    U_L = objective_influence(oL, th, total @ HLp, xi)
    U_H = objective_influence(oH, th, A_H, cs)
    st = CellStats.from_parts([(data.llm.n, data.llm.y, oL.probabilities(th), 1.0 / data.n_llm, False),
                               (data.human.n, data.human.y, oH.probabilities(th), 1.0 / data.n_human, True)])
    U = stack_influence([U_L, U_H])
    return Linearization(MeatSource(U.J, st), U.A, target_slices(data.N, U.A.shape[0]), "the calibrated scores",
                         stage_one=slice(0, U_L.A.shape[1]))


def target_slices(N: int, rows: int, log_nu: int = 0) -> dict[str, slice]:
    """Return the blocks of the targets ``(s, log_nu rows of log nu, beta)``, ``rows`` in all (``Chart.target_jacobian``)."""
    nl = int(log_nu)
    return ({"scores": slice(0, N)} | ({"log_nu": slice(N, N + nl)} if nl else {})
            | ({"beta": slice(N + nl, rows)} if rows > N + nl else {}))


def staged_influence(data: Comparisons, fit_: Any) -> tuple[Influence, CellStats]:
    """Return :func:`staged_linearization` as factored influence and the cells' statistics."""
    lin = staged_linearization(data, fit_)
    return Influence(as_sparse(lin.source.J), lin.A), lin.source.stats


def finite_influence(data: Comparisons, ch: Chart, lambda_: float, theta: np.ndarray,
                     hess_pinv: np.ndarray | None = None) -> tuple[Influence, CellStats]:
    """Influence ``u_c = sdot H^+ d eta_c/d theta`` of ``(s, beta)`` at a finite weight (eq. weighted-empirical-sandwich)."""
    obj = Objective.weighted(ch, data, lambda_)
    Hp = hess_pinv if hess_pinv is not None else pinv_sym(obj.value_grad_hess(theta)[2], gauge=ch.gauge_directions(theta))[0]
    U = objective_influence(obj, theta, ch.target_jacobian(theta) @ Hp)
    p = obj.probabilities(theta)
    h = obj.cells.is_human
    st = CellStats.from_parts([(data.llm.n, data.llm.y, p[~h], lambda_ / data.n_llm, False),
                               (data.human.n, data.human.y, p[h], 1.0 / data.n_human, True)])
    return U, st


def llm_only_linearization(data: Comparisons, chart: Chart, theta: np.ndarray,
                           hess: np.ndarray | None = None) -> tuple[Linearization, Linearization]:
    """Linearizations of ``b`` and of ``gamma`` of the LLM-only fit (Prop. stage-one-normality).

    Bread ``H(l_L)^+`` (``hess`` when known), one :class:`MeatSource` cached on ``data``; the Jacobian of
    ``gamma = consensus_gamma(S)`` by central differences.
    """
    def build() -> tuple[MeatSource, np.ndarray]:
        o = Objective(chart, Cells.stack(data, 1.0 / data.n_llm, 0.0))
        H = hess if hess is not None else o.value_grad_hess(theta)[2]
        Hp = pinv_sym(H, gauge=chart.gauge_directions(theta))[0]
        st = CellStats.from_parts([(data.llm.n, data.llm.y, o.probabilities(theta), 1.0 / data.n_llm, False)])
        return MeatSource(CellJacobian(o, theta), st), np.asarray(chart.T_sparse @ Hp.T).T

    source, HpT = derived(data, ("llm_only_linearization", chart, theta.tobytes()), build)
    Eb = np.eye(chart.dim)[chart.slices["b"]] if chart.order else np.zeros((0, chart.dim))
    Eg = np.empty((data.K, chart.dim))
    for t, e in enumerate(1e-6 * np.eye(chart.dim)):
        Eg[:, t] = (consensus_gamma(chart.S(theta + e)) - consensus_gamma(chart.S(theta - e))) / 2e-6
    return (Linearization(source, Eb @ HpT, {"b": slice(0, Eb.shape[0])}, "the position effects b"),
            Linearization(source, Eg @ HpT, {"gamma": slice(0, data.K)}, "the consensus loadings gamma"))


def tie_table(names: list[str], groups: np.ndarray, free: np.ndarray, log_nu: np.ndarray, var: np.ndarray,
              level: float, ties: str) -> pd.DataFrame:
    """Tabulate the tie parameter ``nu``/``tau, se, ci_low, ci_high`` by group (delta method, log-scale interval; 0: no ties)."""
    zq = norm.ppf(0.5 + level / 2)
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
