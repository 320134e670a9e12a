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

from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from pydial.data.comparisons import Comparisons, HumanCells, LLMCells
from pydial.estimation.engines import BTLFit, StructuredFit
from pydial.model.chart import Chart, centering_basis, structure_from_S
from pydial.exceptions import ArgumentError
from pydial.model.design import Design, calibration_design, centered_design, dense_design, glm_information, gram, rmatvec
from pydial.model.families import family_of
from pydial.model.likelihood import Objective, binomial_nll
from pydial.model.penalty import FirthPenalty, TieFirthPenalty, check_penalty
from pydial.optim import BOX, OptimResult, newton

START_GTOL = 1e-3
"""Gradient tolerance of the judge-wise fits of :func:`initial_theta`: a start, which the structured fit then resolves."""


def binary_counts(n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(m, 3)`` outcome counts ``(y, n - y, 0)`` of binary cells (``n`` decisive judgments, ``y`` wins of ``i``)."""
    n, y = np.asarray(n, float), np.asarray(y, float)
    return np.column_stack([y, n - y, np.zeros_like(y)])


def has_tie_parameter(family: str | None, counts: np.ndarray) -> bool:
    """Whether a GLM of ``family`` on ``counts`` has a free log tie parameter ``l = log nu``.

    A tie model with at least one tie.  Without any tie the MLE of ``nu`` is the boundary
    ``nu = 0`` for both tie models, where the cells follow the binary model exactly
    (:func:`pydial.model.likelihood.tie_groups`); the GLM is then the binary one.
    """
    return family is not None and bool(np.asarray(counts)[:, 2].sum() > 0)


@dataclass(frozen=True, eq=False)
class FamilyGLM:
    r"""A paired-comparison GLM ``eta = X beta`` of any outcome family, as a loss to minimize.

    The loss is ``-weight * sum_c log p(counts_c | eta_c, l) + ridge/2 |beta|^2`` with the
    cell likelihoods of :mod:`pydial.model.families`: the binary model (``family=None``;
    the binomial logistic regression of eq. human-only-estimator and eq.
    binomial-model-llm) or the Davidson / Rao-Kupper tie model, whose coordinates are
    ``x = (beta, l)`` with ``l = log nu`` when the cells hold a tie
    (:func:`has_tie_parameter`; otherwise ``x = beta`` and the binary model, the ``nu = 0``
    boundary).  With ``penalty="firth"`` the term ``-weight/2 log det I(x)`` is added, ``I`` the
    family's Fisher information of the GLM (the Jeffreys prior: :class:`~pydial.model.penalty.FirthPenalty`,
    :class:`~pydial.model.penalty.TieFirthPenalty`), so the minimizer is Firth's bias-reduced
    estimate, finite whenever ``X`` has full column rank.

    The value, gradient and exact Hessian (:meth:`terms`) follow from the per-cell
    derivatives in ``(eta, l)`` by the chain rule ``d eta / d beta = X``; the binary model
    takes the fast path of the binomial deviance and the comparison Laplacian
    (:func:`pydial.model.design.glm_information`).

    Attributes
    ----------
    family : {None, "davidson", "rao-kupper"}
    counts : ndarray (m, 3)
        Wins of ``i``, wins of ``j``, ties per cell (the binary model takes no ties).
    X : ndarray, sparse matrix or Design
        The design (m x p).
    weight, ridge : float
        Loss normalization (``1/n``) and ridge on ``beta``.
    penalty : {None, "firth"}
    """

    family: str | None
    counts: np.ndarray
    X: Any
    weight: float = 1.0
    ridge: float = 0.0
    penalty: str | None = None

    def __post_init__(self) -> None:
        """Check the family, the counts and the penalty; keep a sparse or dense design as given."""
        family_of(self.family)  # raises ArgumentError for an unknown family
        counts = np.asarray(self.counts, float).reshape(-1, 3)
        if self.family is None and np.any(counts[:, 2] > 0):
            raise ArgumentError("the binary model takes cells without ties")
        object.__setattr__(self, "counts", counts)
        if not (sp.issparse(self.X) or isinstance(self.X, Design)):
            object.__setattr__(self, "X", np.asarray(self.X, float))
        check_penalty(self.penalty)

    @cached_property
    def free(self) -> bool:
        """Whether ``x`` ends with a free ``log nu`` (:func:`has_tie_parameter`)."""
        return has_tie_parameter(self.family, self.counts)

    @property
    def dim(self) -> int:
        """Number of coordinates of ``x``."""
        return self.X.shape[1] + int(self.free)

    @cached_property
    def _binary(self) -> tuple[np.ndarray, np.ndarray]:
        """``(n, y)`` of the binary model."""
        return self.counts[:, 0] + self.counts[:, 1], self.counts[:, 0]

    @cached_property
    def _firth(self) -> FirthPenalty | None:
        """The binary model's Jeffreys prior (``penalty="firth"``)."""
        return FirthPenalty(dense_design(self.X), self._binary[0], self.weight) if self.penalty == "firth" else None

    @cached_property
    def _tie_firth(self) -> TieFirthPenalty | None:
        """The tie model's Jeffreys prior in ``(beta, log nu)`` (``penalty="firth"``)."""
        if self.penalty != "firth":
            return None
        return TieFirthPenalty(cast(str, self.family), dense_design(self.X), self.counts, self.weight)

    def start(self) -> np.ndarray:
        """Return the start ``beta = 0``, ``log nu`` at the cells' tie rate (:func:`~pydial.model.families.log_nu_start`)."""
        beta = np.zeros(self.X.shape[1])
        return np.append(beta, family_of(self.family).log_nu_start(self.counts)) if self.free else beta

    def value(self, x: np.ndarray) -> float:
        """Return the loss at ``x``."""
        X, p = self.X, self.X.shape[1]
        beta = x[:p]
        if not self.free:
            n, y = self._binary
            f = float(self.weight * binomial_nll(X @ beta, n, y).sum() + 0.5 * self.ridge * beta @ beta)
            return f + self._firth.value(X @ beta) if self._firth is not None else f
        d = family_of(self.family).cell(self.counts, X @ beta, x[p])
        f = -self.weight * float(d.value.sum()) + 0.5 * self.ridge * float(beta @ beta)
        return f + self._tie_firth.value(x) if self._tie_firth is not None else f

    def terms(self, x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Value, gradient and Hessian of the loss at ``x``."""
        X, p, w = self.X, self.X.shape[1], self.weight
        beta = x[:p]
        eta = X @ beta
        if not self.free:
            n, y = self._binary
            pr = expit(eta)
            f = float(w * binomial_nll(eta, n, y).sum() + 0.5 * self.ridge * beta @ beta)
            g = w * rmatvec(X, n * pr - y) + self.ridge * beta
            H = glm_information(X, n, pr, w) + self.ridge * np.eye(p)
            if self._firth is not None:
                fp, gp, Hp = self._firth.glm_terms(beta)
                f, g, H = f + fp, g + gp, H + Hp
            return f, g, H
        d = family_of(self.family).cell(self.counts, eta, x[p])
        f = -w * float(d.value.sum()) + 0.5 * self.ridge * float(beta @ beta)
        gb = -w * rmatvec(X, d.d_eta) + self.ridge * beta
        Hbb = gram(X, -w * d.d_eta_eta) + self.ridge * np.eye(p)
        Hbl = -w * rmatvec(X, d.d_eta_l)
        g = np.append(gb, -w * d.d_l.sum())
        H = np.block([[Hbb, Hbl[:, None]], [Hbl[None, :], np.array([[-w * d.d_l_l.sum()]])]])
        if self._tie_firth is not None:
            fp, gp, Hp = self._tie_firth.terms(x)
            f, g, H = f + fp, g + gp, H + Hp
        return f, g, H

    def fit(self, x0: np.ndarray | None = None, *, bound: float = BOX, gtol: float = 1e-10) -> OptimResult:
        """Minimize the loss by Newton steps with line search inside the box ``|x_i| <= bound`` (:func:`pydial.optim.newton`).

        The binary loss is convex: its steps are solved by Cholesky factorization.  The
        tie log-likelihood is concave in ``beta`` for fixed ``log nu`` but not jointly
        everywhere; the eigen-decomposition of :func:`~pydial.optim.newton` handles that.
        """
        start = self.start() if x0 is None else np.asarray(x0, float)
        return newton(self.terms, start, bound=bound, gtol=gtol, value=self.value, cholesky=not self.free)


def glm(
    family: str | None,
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
    family : {None, "davidson", "rao-kupper"}
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
    return FamilyGLM(family, counts, X, weight, ridge, penalty).fit(x0, bound=bound, gtol=gtol)


def fit_human_btl(human: HumanCells, N: int, *, ridge: float = 0.0, penalty: str | None = None) -> BTLFit:
    r"""Centered human BTL MLE :math:`\hat s_0` (eq. human-only-estimator), loss normalized by ``n_H``.

    Firth's bias-reduced estimate with ``penalty="firth"``.
    """
    T = centering_basis(N)
    X = centered_design(human.i, human.j, N)
    opt = glm(None, binary_counts(human.n, human.y), X, weight=1.0 / float(human.n.sum()), ridge=ridge, penalty=penalty)
    return BTLFit(T @ opt.x, 0.0, opt)


def fit_order_btl(cells: LLMCells, N: int, *, order: bool = True, ridge: float = 0.0,
                  penalty: str | None = None, gtol: float = 1e-10) -> BTLFit:
    r"""One judge's order-effect BTL, ``logit p = s_i - s_j + a b`` (eq. binomial-model-llm).

    With ``order=False`` the order effect is fixed at 0 (plain BTL on the pooled cells);
    ``penalty="firth"`` gives Firth's bias-reduced estimate; ``gtol`` is Newton's gradient tolerance.
    """
    T = centering_basis(N)
    X = centered_design(cells.i, cells.j, N, cells.a if order else None)
    opt = glm(None, binary_counts(cells.n, cells.y), X, weight=1.0 / float(cells.n.sum()), ridge=ridge, penalty=penalty,
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
    return glm(None, binary_counts(human.n, human.y), X, x0, weight=1.0 / float(human.n.sum()), bound=bound,
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
    lam: float,
    theta0: np.ndarray,
    *,
    gtol: float = 1e-9,
    max_iter: int = 200,
    penalty: str | None = None,
    warm: tuple[float, OptimResult] | None = None,
    polish: bool = True,
) -> StructuredFit:
    r"""Minimize :math:`Q_\lambda` (``lam`` finite) or :math:`\ell_L` (``lam = inf``) on the reduced chart.

    ``lam = inf`` goes with ``chart.calibration`` None; the start is ``theta0``.

    ``warm = (lam0, opt0)``: a fit of :math:`Q_{\lambda_0}` (finite ``lam0 > 0``) ending at
    ``theta0`` with its value, gradient and Hessian there.  The loss is affine in the LLM
    weight, :math:`Q_\lambda = Q_0 + (\lambda / \lambda_0)(Q_{\lambda_0} - Q_0)` with
    :math:`Q_0` the human block (penalty included), so the derivatives at ``theta0`` follow
    exactly from those of ``opt0`` and of the human cells alone: the path's warm start
    costs no pass over the LLM cells.  ``lam0 = inf``: ``opt0`` is the LLM-only fit
    (:math:`\bar\ell_L` on the LLM-only chart) ending at ``theta0[chart.llm_coordinates]``,
    and :math:`Q_\lambda = \lambda \bar\ell_L + Q_0` (the staged start of the path).

    Gauge drift is removed after every step by re-expressing the iterate in the
    canonical gauge (same ``(s, S, b)``), so the box bounds act on a fixed
    representative.  ``penalty="firth"`` adds the human block's Jeffreys prior
    (:meth:`Objective.weighted`).  ``polish`` (:func:`~pydial.optim.newton`): resolve the
    optimum to the rounding level with one more step once the gradient is below ``gtol``.
    """
    obj = Objective.weighted(chart, data, lam, penalty)
    res = newton(
        obj.value_grad_hess,
        theta0,
        gtol=gtol,
        max_iter=max_iter,
        value=obj.value,
        normalize=chart.canonical if chart.r > 0 else None,
        gauge=chart.gauge_directions,
        first=_path_derivatives(data, chart, lam, theta0, penalty, warm),
        polish=polish,
    )
    return StructuredFit(chart, res.x, res, obj)


def _path_derivatives(data: Comparisons, chart: Chart, lam: float, theta0: np.ndarray, penalty: str | None,
                      warm: tuple[float, OptimResult] | None) -> tuple[float, np.ndarray, np.ndarray] | None:
    """``Q_lam``'s value, gradient and Hessian at ``theta0`` from a fit of ``Q_lam0`` there (:func:`fit_structured`)."""
    if warm is None or not np.isfinite(lam):
        return None
    lam0, opt0 = warm
    staged = np.isinf(lam0) and chart.calibration is not None
    x0 = theta0[chart.llm_coordinates] if staged else theta0
    if not (lam0 > 0) or opt0.hess is None or opt0.grad is None or not np.array_equal(opt0.x, x0):
        return None
    f_h, g_h, H_h = Objective.weighted(chart, data, 0.0, penalty).value_grad_hess(theta0)
    if staged:
        idx = chart.llm_coordinates
        g_h[idx] += lam * opt0.grad
        H_h[np.ix_(idx, idx)] += lam * opt0.hess
        return lam * opt0.fun + f_h, g_h, H_h
    t = lam / lam0
    return t * opt0.fun + (1 - t) * f_h, t * opt0.grad + (1 - t) * g_h, t * opt0.hess + (1 - t) * H_h
