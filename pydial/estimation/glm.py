r"""Optimizers for the models of the paper (numpy engine).

* :func:`glm` (:class:`FamilyGLM`) -- the one GLM solver, paired-comparison regression of
  every outcome family (binary, Davidson, Rao-Kupper) with counts; serves the human
  BTL (eq. human-only-estimator), each judge's order-effect BTL
  (eq. binomial-model-llm), the pooled BTL and the staged calibration
  ``argmin_c l_H(M c)`` (eq. staged-calibrated-estimator), with ties or without;
* :func:`fit_structured` -- the structured LLM-only fit and the weighted joint fit
  :math:`Q_\lambda` (eq. weighted-joint-estimator) on the reduced chart;
* :func:`initial_theta` -- a start for the non-convex structured fit from ridge
  judge-wise fits and an SVD (Cond. llm-structure).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from pydial.data.comparisons import Comparisons, HumanCells, LLMCells
from pydial.cache import derived
from pydial.estimation.engines import BTLFit, StagedFit, StructuredFit
from pydial.model.chart import Calibration, Chart, centering_basis, structure_from_S
from pydial.model.design import Design, calibration_design, centered_design, dense_design
from pydial.model.families import BINARY, Family, family_of
from pydial.model.glm import FamilyGLM, binary_counts
from pydial.model.likelihood import Objective
from pydial.optim import BOX, OptimResult, newton

START_GTOL = 1e-3
"""Gradient tolerance of the judge-wise fits of :func:`initial_theta`: a start, which the structured fit then resolves."""


def glm(
    family: "Family | str | None",
    counts: np.ndarray,
    X: "np.ndarray | sp.spmatrix | Design",
    x0: np.ndarray | None = None,
    *,
    weight: float = 1.0,
    ridge: float = 0.0,
    penalty: str | None = None,
    bound: float = BOX,
    gtol: float = 1e-10,
) -> OptimResult:
    r"""Fit the paired-comparison GLM ``eta = X beta`` of ``family`` (:class:`FamilyGLM`): the one GLM solver.

    Every GLM of pydial goes through here: the human BTL (eq. human-only-estimator), each
    judge's order-effect BTL (eq. binomial-model-llm), the pooled BTL, the staged
    calibration ``argmin_c l_H(M c)`` (eq. staged-calibrated-estimator), each with ties
    (``family="davidson"`` or ``"rao-kupper"``, ``x = (beta, log nu)`` when a cell holds a
    tie) or without (``family=None``, binomial logistic regression).

    Parameters
    ----------
    family : Family, or a ``ties=`` option (``None``, ``"davidson"``, ``"rao-kupper"``)
    counts : ndarray (m, 3)
        Wins of ``i``, wins of ``j``, ties per cell (:func:`binary_counts` from ``(n, y)``).
    X : ndarray, sparse matrix or Design
        Design, m x p.
    x0 : ndarray, optional
        Start (default :meth:`FamilyGLM.start`).
    weight, ridge, penalty
        As in :class:`FamilyGLM`.
    bound, gtol
        Box and gradient tolerance of :func:`pydial.optim.newton`.
    """
    return FamilyGLM(family_of(family), counts, X, weight, ridge, penalty).fit(x0, bound=bound, gtol=gtol)


def fit_human_btl(human: HumanCells, N: int, *, ridge: float = 0.0, penalty: str | None = None) -> BTLFit:
    r"""Centered human BTL MLE :math:`\hat s_0` (eq. human-only-estimator), loss normalized by ``n_H``.

    Firth's bias-reduced estimate with ``penalty="firth"``.
    """
    T = centering_basis(N)
    X = centered_design(human.i, human.j, N)
    opt = glm(BINARY, binary_counts(human.n, human.y), X, weight=1.0 / float(human.n.sum()), ridge=ridge, penalty=penalty)
    return BTLFit(T @ opt.x, 0.0, opt)


def fit_order_btl(cells: LLMCells, N: int, *, order: bool = True, ridge: float = 0.0,
                  penalty: str | None = None, gtol: float = 1e-10) -> BTLFit:
    r"""One judge's order-effect BTL, ``logit p = s_i - s_j + a b`` (eq. binomial-model-llm).

    With ``order=False`` the order effect is fixed at 0 (plain BTL on the pooled cells);
    ``penalty="firth"`` gives Firth's bias-reduced estimate; ``gtol`` is Newton's gradient tolerance.
    """
    T = centering_basis(N)
    X = centered_design(cells.i, cells.j, N, cells.a if order else None)
    opt = glm(BINARY, binary_counts(cells.n, cells.y), X, weight=1.0 / float(cells.n.sum()), ridge=ridge, penalty=penalty,
              gtol=gtol)
    s = T @ opt.x[: N - 1]
    return BTLFit(s, float(opt.x[-1]) if order else 0.0, opt)


def fit_calibration(human: HumanCells, M: np.ndarray, *, x0: np.ndarray | None = None, bound: float = BOX,
                    penalty: str | None = None) -> OptimResult:
    r"""Staged calibration :math:`\hat c = \arg\min_c \ell_H(M c)` (eq. staged-calibrated-estimator).

    With ``penalty="firth"`` the Firth estimate of the calibration GLM (design ``D_H M``).
    With covariates the coordinates are ``(c, beta_H)`` (design ``[D_H M, Z_H]``, :func:`calibration_design`).
    """
    X = dense_design(calibration_design(human.i, human.j, M.shape[0], M, human.z))
    return glm(BINARY, binary_counts(human.n, human.y), X, x0, weight=1.0 / float(human.n.sum()), bound=bound,
               penalty=penalty)


# ---------------------------------------------------------- structured fits
def initial_theta(data: Comparisons, chart: Chart, *, ridge: float = 1e-3) -> np.ndarray:
    """Start for the structured fit: ridge judge-wise order-effect fits, then an SVD.

    The SVD is the consensus-plus-rank-r SVD of their score matrix (Cond. llm-structure).
    For a calibrated chart the calibration coordinates are the least-squares projection
    of the people's ridge BTL scores on the basis ``M`` (``e_1`` without human data).
    The one start of every structured fit of both engines, and of Stan's NUTS chains
    (jittered, :func:`pydial.stan.schema.dial_sample_inits`).

    The ridge keeps every judge's fit finite even when the judge alone is not
    identified; the structured fit then corrects it.
    """
    N, K = data.N, data.K
    S0 = np.zeros((K, N))
    b0 = np.zeros(K)
    judge = data.llm.judge
    ordered = judge.size < 2 or bool(np.all(judge[1:] >= judge[:-1]))
    bounds = np.searchsorted(judge, np.arange(K + 1)) if ordered else None
    for k in range(K):
        cells = data.llm.select(slice(bounds[k], bounds[k + 1]) if bounds is not None else judge == k)
        f = fit_order_btl(cells, N, order=chart.order, ridge=ridge, gtol=START_GTOL)
        S0[k], b0[k] = f.s, f.b
    if np.linalg.norm(S0.sum(0)) == 0.0:
        S0[0, 0], S0[0, 1] = 1e-3, -1e-3
    st = structure_from_S(S0, chart.r)
    c = None
    if chart.calibration is not None:
        c = np.eye(chart.d)[0]
        if data.n_human:
            c = np.linalg.lstsq(st.basis(chart.calibration), fit_human_btl(data.human, N, ridge=ridge).s, rcond=None)[0]
    theta = chart.from_structure(st, c=c, b=b0 if chart.order else None)
    return np.clip(theta, -BOX * 0.9, BOX * 0.9)


def fit_structured(
    data: Comparisons,
    chart: Chart,
    lambda_: float,
    theta0: np.ndarray,
    *,
    gtol: float = 1e-9,
    max_iter: int = 200,
    penalty: str | None = None,
    warm: tuple[float, OptimResult] | None = None,
    polish: bool = True,
) -> StructuredFit:
    r"""Minimize :math:`Q_\lambda` (``lambda_`` finite) or :math:`\ell_L` (``lambda_ = inf``) on the reduced chart.

    ``lambda_ = inf`` goes with ``chart.calibration`` None; the start is ``theta0``.

    ``warm = (lambda_0, opt0)``: a fit of :math:`Q_{\lambda_0}` (finite ``lambda_0 > 0``) ending at
    ``theta0`` with its value, gradient and Hessian there.  The loss is affine in the LLM
    weight, :math:`Q_\lambda = Q_0 + (\lambda / \lambda_0)(Q_{\lambda_0} - Q_0)` with
    :math:`Q_0` the human block (penalty included), so the derivatives at ``theta0`` follow
    exactly from those of ``opt0`` and of the human cells alone: the path's warm start
    costs no pass over the LLM cells.  ``lambda_0 = inf``: ``opt0`` is the LLM-only fit
    (:math:`\bar\ell_L` on the LLM-only chart) ending at ``theta0[chart.llm_coordinates]``,
    and :math:`Q_\lambda = \lambda \bar\ell_L + Q_0` (the staged start of the path).

    Gauge drift is removed after every step by re-expressing the iterate in the
    canonical gauge (same ``(s, S, b)``), so the box bounds act on a fixed
    representative.  ``penalty="firth"`` adds the human block's Jeffreys prior
    (:meth:`Objective.weighted`).  ``polish`` (:func:`~pydial.optim.newton`): resolve the
    optimum to the rounding level with one more step once the gradient is below ``gtol``.
    """
    obj = Objective.weighted(chart, data, lambda_, penalty)
    res = newton(
        obj.value_grad_hess,
        theta0,
        gtol=gtol,
        max_iter=max_iter,
        value=obj.value,
        normalize=chart.canonical if chart.r > 0 else None,
        gauge=chart.gauge_directions,
        first=_path_derivatives(data, chart, lambda_, theta0, penalty, warm),
        polish=polish,
    )
    return StructuredFit(chart, res.x, res, obj)


def _path_derivatives(data: Comparisons, chart: Chart, lambda_: float, theta0: np.ndarray, penalty: str | None,
                      warm: tuple[float, OptimResult] | None) -> tuple[float, np.ndarray, np.ndarray] | None:
    """``Q_lam``'s value, gradient and Hessian at ``theta0`` from a fit of ``Q_lam0`` there (:func:`fit_structured`)."""
    if warm is None or not np.isfinite(lambda_):
        return None
    lambda_0, opt0 = warm
    staged = np.isinf(lambda_0) and chart.calibration is not None
    x0 = theta0[chart.llm_coordinates] if staged else theta0
    if not (lambda_0 > 0) or opt0.hess is None or opt0.grad is None or not np.array_equal(opt0.x, x0):
        return None
    f_h, g_h, H_h = Objective.weighted(chart, data, 0.0, penalty).value_grad_hess(theta0)
    if staged:
        idx = chart.llm_coordinates
        g_h[idx] += lambda_ * opt0.grad
        H_h[np.ix_(idx, idx)] += lambda_ * opt0.hess
        return lambda_ * opt0.fun + f_h, g_h, H_h
    t = lambda_ / lambda_0
    return t * opt0.fun + (1 - t) * f_h, t * opt0.grad + (1 - t) * g_h, t * opt0.hess + (1 - t) * H_h


def human_effects(data: Comparisons) -> np.ndarray:
    """Return the indices of the covariates with an effect on the people: the free entries of ``beta_H``.

    Every covariate but those that are 0 on all the people's cells (:attr:`~pydial.Comparisons.covariate_support`,
    e.g. the self-preference); the columns of the people's GLM designs (:meth:`~pydial.Comparisons.effect_columns`).
    """
    return np.flatnonzero(data.covariate_support[-1])


def human_effect_row(data: Comparisons, free: np.ndarray) -> np.ndarray:
    """Return the people's whole row ``beta_H`` (``p``) from its free entries (:func:`human_effects`; the others 0)."""
    out = np.zeros(data.p)
    out[human_effects(data)] = free
    return out


def staged_fit(data: Comparisons, rank: int, calibration: str, *, order: bool = True,
               penalty: str | None = None, shared: bool = False) -> StagedFit:
    """Alg. DIAL-Anc: structured LLM-only fit, then ``argmin_c l_H(M c)``.

    With ``penalty="firth"``, the calibration GLM is Firth's estimate.  With covariates the
    calibration GLM fits ``(c, beta_H)`` (``l_H(M c, beta_H)``); ``shared``: one covariate
    effect for all LLM judges (:class:`~pydial.model.chart.Chart`).
    """
    chL, fL = llm_only_fit(data, rank, order, shared)
    st = chL.structure(fL.theta)
    M = st.basis(calibration)
    # the people's design [D_H M, Z_H] has the covariates with an effect on them (Comparisons.effect_columns)
    human = data.human if not data.p else dataclasses.replace(data.human, z=data.effect_columns(data.human.z, data.K))
    oc = fit_calibration(human, M, penalty=penalty)
    ch = Chart.for_data(data, rank, cast(Calibration, calibration), order, shared)
    b = chL.order_effects(fL.theta) if order else None
    d = M.shape[1]
    beta = np.vstack([chL.covariate_effects(fL.theta), human_effect_row(data, oc.x[d:])]) if data.p else None
    theta = ch.from_structure(st, oc.x[:d], b, beta)
    theta[ch.llm_coordinates] = fL.theta  # the same point up to rounding; exactly the first stage's coordinates
    return StagedFit(ch, theta, fL.opt, oc, chL, fL.theta)


def llm_only_fit(data: Comparisons, rank: int, order: bool = True, shared: bool = False) -> tuple[Chart, StructuredFit]:
    """Return the structured LLM-only fit (eq. staged-calibrated-estimator, first stage).

    It is computed once per ``(rank, order, shared)`` and cached on ``data``: DIAL-Anc,
    DIAL-Ada (its anchored endpoint and warm start) and AtC share it.
    """
    def build() -> tuple[Chart, Any]:
        chL = Chart.for_data(data, rank, None, order, shared)
        fL = fit_structured(data, chL, np.inf, initial_theta(data, chL))
        return chL, dataclasses.replace(fL, objective=None)  # keep the fit, not its objective (per-cell index arrays)

    return derived(data, ("llm_only_fit", int(rank), bool(order), bool(shared and data.p)), build)
