r"""The numpy engine: the GLM solver, the structured fits and the stages of DIAL-Anc for every outcome family.

:func:`glm` fits every paired-comparison GLM, :func:`fit_structured` the structured fits (eq. weighted-joint-estimator),
:func:`llm_only_fit` and :func:`staged_fit` the two stages of Alg. DIAL-Anc by any engine.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from pydial.data.comparisons import Comparisons, HumanCells, LLMCells
from pydial.cache import derived
from pydial.estimation.engines import BTLFit, Optimizers, StagedFit, StructuredFit
from pydial.model.blocks import ordered_map
from pydial.model.chart import Calibration, Chart, centering_basis, structure_from_S
from pydial.model.design import Design, calibration_design, centered_design, dense_design
from pydial.model.families import BINARY, Family, family_of
from pydial.model.glm import FamilyGLM, binary_counts
from pydial.model.cells import Cells, family_totals, free_groups, human_counts, human_table
from pydial.model.likelihood import Objective
from pydial.optim import BOX, OptimResult, newton

START_GTOL = 1e-3
"""Gradient tolerance of the judge-wise fits of :func:`initial_theta`: a start, which the structured fit then resolves."""


def glm(family: "Family | str | None", counts: np.ndarray, X: "np.ndarray | sp.spmatrix | Design",
        x0: np.ndarray | None = None, *, weight: float = 1.0, ridge: float = 0.0, penalty: str | None = None,
        bound: float = BOX, gtol: float = 1e-10) -> OptimResult:
    r"""Fit the paired-comparison GLM ``eta = X beta`` of ``family`` (:class:`FamilyGLM`): the one GLM solver.

    ``counts``: ``(m, 3)`` wins of ``i``, wins of ``j``, ties; ``x = (beta, log nu)`` when a cell holds a tie;
    the other arguments are :class:`FamilyGLM`'s and :func:`pydial.optim.newton`'s.
    """
    return FamilyGLM(family_of(family), counts, X, weight, ridge, penalty).fit(x0, bound=bound, gtol=gtol)


def fit_human_btl(human: HumanCells, N: int, *, ridge: float = 0.0, penalty: str | None = None) -> BTLFit:
    r"""Centered human BTL MLE :math:`\hat s_0` (eq. human-only-estimator), normalized by ``n_H``; Firth's with ``penalty``."""
    return fit_order_btl(human, N, order=False, ridge=ridge, penalty=penalty)


def fit_order_btl(cells: LLMCells | HumanCells, N: int, *, order: bool = True, ridge: float = 0.0,
                  penalty: str | None = None, gtol: float = 1e-10) -> BTLFit:
    r"""One judge's order-effect BTL ``logit p = s_i - s_j + a b`` (eq. binomial-model-llm); ``order=False``: ``b = 0``."""
    X = centered_design(cells.i, cells.j, N, cells.a if order else None)
    opt = glm(BINARY, binary_counts(cells.n, cells.y), X, weight=1.0 / float(cells.n.sum()), ridge=ridge, penalty=penalty,
              gtol=gtol)
    return BTLFit(centering_basis(N) @ opt.x[: N - 1], float(opt.x[-1]) if order else 0.0, opt)


def fit_calibration(human: HumanCells, M: np.ndarray, *, x0: np.ndarray | None = None, bound: float = BOX,
                    penalty: str | None = None) -> OptimResult:
    r"""Staged calibration :math:`\hat c = \arg\min_c \ell_H(M c)` (eq. staged-calibrated-estimator), with ``beta_H``."""
    X = dense_design(calibration_design(human.i, human.j, M.shape[0], M, human.z))
    return glm(BINARY, binary_counts(human.n, human.y), X, x0, weight=1.0 / float(human.n.sum()), bound=bound,
               penalty=penalty)


def initial_theta(data: Comparisons, chart: Chart, *, ridge: float = 1e-3) -> np.ndarray:
    """Start every structured fit (both engines): the consensus-plus-rank-r SVD of ridge judge-wise fits' scores.

    A calibrated chart's ``c`` projects the people's ridge BTL scores on ``M`` (``e_1`` without human data).
    """
    N, K = data.N, data.K
    S0 = np.zeros((K, N))
    b0 = np.zeros(K)
    judge = data.llm.judge
    ordered = judge.size < 2 or bool(np.all(judge[1:] >= judge[:-1]))
    bounds = np.searchsorted(judge, np.arange(K + 1)) if ordered else None
    llm = data.llm

    def judge_fit(k: int) -> BTLFit:
        cells = llm.select(slice(bounds[k], bounds[k + 1]) if bounds is not None else judge == k)
        return fit_order_btl(cells, N, order=chart.order, ridge=ridge, gtol=START_GTOL)

    for k, f in enumerate(ordered_map(judge_fit, K, judge.size)):  # the judges' fits on the cores
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


def fit_structured(data: Comparisons, chart: Chart, lambda_: float, theta0: np.ndarray, *, gtol: float = 1e-9,
                   max_iter: int = 200, penalty: str | None = None, warm: tuple[float, OptimResult] | None = None,
                   polish: bool = True) -> StructuredFit:
    r"""Minimize :math:`Q_\lambda` (``lambda_`` finite) or :math:`\ell_L` (``lambda_ = inf``, LLM-only chart) from ``theta0``.

    ``warm = (lambda_0, opt0)``, a fit ending at ``theta0``: :math:`Q_\lambda` is affine in the weight, so its
    derivatives there follow from ``opt0``'s (:func:`_path_derivatives`); ``polish``: one more step at the rounding level.
    """
    obj = Objective.weighted(chart, data, lambda_, penalty)
    res = newton(obj.value_grad_hess, theta0, gtol=gtol, max_iter=max_iter, value=obj.value,
                 normalize=chart.canonical if chart.r > 0 else None, gauge=chart.gauge_directions,
                 first=_path_derivatives(data, chart, lambda_, theta0, penalty, warm), polish=polish)
    return StructuredFit(chart, res.x, res, obj)


def _path_derivatives(data: Comparisons, chart: Chart, lambda_: float, theta0: np.ndarray, penalty: str | None,
                      warm: tuple[float, OptimResult] | None) -> tuple[float, np.ndarray, np.ndarray] | None:
    """``Q_lam``'s value, gradient and Hessian at ``theta0`` from a fit of ``Q_lam0`` there (``inf``: the LLM-only fit)."""
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
    """Return the indices of the free entries of ``beta_H``: the covariates not 0 on all the people's cells."""
    return np.flatnonzero(data.covariate_support[-1])


def human_effect_row(data: Comparisons, free: np.ndarray) -> np.ndarray:
    """Return the people's whole row ``beta_H`` (``p``) from its free entries (:func:`human_effects`; the others 0)."""
    out = np.zeros(data.p)
    out[human_effects(data)] = free
    return out


def human_design(data: Comparisons, family: Family) -> Design:
    """Return the people's GLM design of eq. human-only-estimator: the centered chart ``s = T beta`` and ``z' beta_H``."""
    def build() -> Design:
        H = human_table(data, family)
        return centered_design(H.i, H.j, data.N, z=data.effect_columns(H.z, data.K))

    return derived(data, ("human design", family.is_binary), build)


def human_calibration_design(data: Comparisons, family: Family, M: np.ndarray) -> Design:
    """Return the people's calibration design ``[D_H M, Z_H]`` of eq. staged-calibrated-estimator."""
    H = human_table(data, family)
    return calibration_design(H.i, H.j, data.N, M, data.effect_columns(H.z, data.K))


def normalizer(ch: Chart) -> Any:
    """Return Newton's ``normalize`` of ``x = (theta, log nu)`` on ``ch``: ``theta`` to the canonical gauge (None at rank 0)."""
    if ch.r == 0:
        return None
    d = ch.dim
    return lambda x: np.concatenate([ch.canonical(x[:d]), x[d:]])


def _numpy_llm(data: Comparisons, family: Family, ch: Chart, x0: np.ndarray) -> OptimResult:
    # the binary family's fit also steps along the gauge and polishes its optimum (fit_structured)
    obj = Objective.weighted(ch, data, np.inf, ties=family)
    binary = family.is_binary
    return newton(obj.value_grad_hess, x0, gtol=1e-9, value=obj.value, normalize=normalizer(ch),
                  gauge=ch.gauge_directions if binary else None, polish=binary)


def _numpy_calibration(data: Comparisons, family: Family, ch: Chart, theta: np.ndarray, M: np.ndarray,
                       x0: np.ndarray, penalty: str | None = None) -> OptimResult:
    X = human_calibration_design(data, family, M)  # the binary GLM on its dense design, as fit_calibration's
    return _numpy_human(data, family, x0, penalty, dense_design(X) if family.is_binary else X)


def _numpy_joint(data: Comparisons, family: Family, ch: Chart, lambda_: float, x0: np.ndarray,
                 penalty: str | None = None) -> OptimResult:
    obj = Objective.weighted(ch, data, lambda_, penalty, ties=family)
    return newton(obj.value_grad_hess, x0, gtol=1e-9, value=obj.value, normalize=normalizer(ch))


def _numpy_human(data: Comparisons, family: Family, x0: np.ndarray, penalty: str | None = None,
                 X: "Design | np.ndarray | None" = None) -> OptimResult:
    """Fit the people's GLM (design ``X``, default :func:`human_design`), loss normalized by ``n_H``."""
    X = human_design(data, family) if X is None else X
    return glm(family, human_counts(data, family), X, x0, weight=1.0 / family_totals(data, family)[1], penalty=penalty)


def numpy_path(data: Comparisons, chart: Chart, lambda_: float, theta0: np.ndarray, *, penalty: str | None = None,
               warm: tuple[float, OptimResult] | None = None, polish: bool = True) -> tuple[np.ndarray, OptimResult]:
    """Minimize the binary family's ``Q_lambda`` (eq. weighted-loss) from ``theta0`` by :func:`fit_structured`."""
    f = fit_structured(data, chart, lambda_, theta0, penalty=penalty, warm=warm, polish=polish)
    return f.theta, f.opt


@cache
def numpy_optimizers(penalty: str | None = None) -> Optimizers:
    """Return the numpy engine (``engine="numpy"``), one per penalty: Newton on exact derivatives, ``path`` penalized by it."""
    return Optimizers(_numpy_llm, _numpy_calibration, _numpy_joint, _numpy_human,
                      path=partial(numpy_path, penalty=penalty), penalty=penalty)


NUMPY = numpy_optimizers()
"""The numpy optimizers without penalty."""


def llm_only_fit(data: Comparisons, rank: int, order: bool = True, shared: bool = False, *, family: Family = BINARY,
                 engine: Optimizers = NUMPY) -> tuple[Chart, np.ndarray, OptimResult, np.ndarray]:
    """Fit the structured LLM-only model (first stage of DIAL-Anc), cached: ``(chart, x = (theta, log nu), optimum, free)``."""
    def build() -> tuple[Chart, np.ndarray, OptimResult, np.ndarray]:
        ch = Chart.for_data(data, rank, None, order, shared)
        free = free_groups(data, ch, family)
        cnt = Cells.stack(data, 1.0, 0.0, with_ties=not family.is_binary)
        l0 = [family.log_nu_start(cnt.counts[cnt.g == g]) for g in free]
        res = engine.llm(data, family, ch, np.concatenate([initial_theta(data, ch), l0]))
        return ch, res.x, res, free

    return derived(data, ("llm_only_fit", family.name, int(rank), bool(order), engine.name, bool(shared and data.p)), build)


def staged_fit(data: Comparisons, rank: int, calibration: str, *, family: Family = BINARY, order: bool = True,
               engine: Optimizers = NUMPY, penalty: str | None = None, shared: bool = False) -> StagedFit:
    """Alg. DIAL-Anc: the LLM-only fit, then ``(c, beta_H, log nu_H)`` of the calibration GLM ``[D_H M, Z_H]``."""
    if family.is_binary and engine.staged is not None:
        return engine.staged(data, rank, calibration, order=order, shared=shared)
    chL, xL, optL, freeL = llm_only_fit(data, rank, order, shared, family=family, engine=engine)
    thL = xL[: chL.dim]
    st = chL.structure(thL)
    M = st.basis(calibration)
    hc = human_counts(data, family)
    free_h = bool(hc[:, 2].sum() > 0)
    d, p, p_h = M.shape[1], data.p, human_effects(data).size
    c0 = np.zeros(d) if family.is_binary else np.eye(d)[0]  # the binary GLM's start c = 0 (as Stan's), else the consensus
    x0 = np.concatenate([c0, np.zeros(p_h)] + ([[family.log_nu_start(hc)]] if free_h else []))
    ch = Chart.for_data(data, rank, cast(Calibration, calibration), order, shared)
    b = chL.order_effects(thL) if order else None

    def beta(x: np.ndarray) -> np.ndarray | None:  # the judges' effects, then beta_H from x = (c, free beta_H, ...)
        return np.vstack([chL.covariate_effects(thL), human_effect_row(data, x[d:d + p_h])]) if p else None

    oc = engine.calibration(data, family, ch, ch.from_structure(st, x0[:d], b, beta(x0)), M, x0, penalty=penalty)
    theta = ch.from_structure(st, oc.x[:d], b, beta(oc.x))
    theta[ch.llm_coordinates] = thL  # the same point up to rounding; exactly the first stage's coordinates
    x = np.concatenate([theta, xL[chL.dim:], oc.x[d + p_h:]])
    return StagedFit(ch, x, optL, oc, chL, xL, free_groups(data, ch, family), freeL)
