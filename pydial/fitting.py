r"""Optimizers for the models of the paper (numpy engine).

* :func:`logistic_glm` -- binomial logistic regression with counts; serves the human
  BTL (eq. human-only-estimator), each judge's order-effect BTL
  (eq. binomial-model-llm), the pooled BTL and the staged calibration
  ``argmin_c l_H(M c)`` (eq. staged-calibrated-estimator);
* :func:`fit_structured` -- the structured LLM-only fit and the weighted joint fit
  :math:`Q_\lambda` (eq. weighted-joint-estimator) on the reduced chart;
* :func:`initial_theta` -- a start for the non-convex structured fit from ridge
  judge-wise fits and an SVD (Cond. llm-structure).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from .data import Comparisons, HumanCells, LLMCells
from .engines import BTLFit, StructuredFit
from .meats import Influence
from .likelihood import Objective, binomial_nll
from .model import Chart, centering_basis, difference_design, structure_from_S
from .optim import BOX, OptimResult, newton
from .penalty import FirthPenalty, check_penalty


# --------------------------------------------------------------------- GLMs
@dataclass(frozen=True)
class Design:
    """A GLM design ``X B`` kept factored.

    Sparse rows with two or three entries (``X``, m x P, e.g. ``e_i - e_j`` and the
    order label) times a dense basis (``B``, P x p, e.g. the centering basis).
    Products with many cells are formed on ``X``; only ``p x p`` and ``P x P``
    matrices are dense.
    """

    X: sp.csr_matrix
    basis: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray | None, int] | None = None  # (i, j, a, N) of the rows of X

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, p)``."""
        return self.X.shape[0], self.basis.shape[1]

    def __matmul__(self, beta: np.ndarray) -> np.ndarray:
        """Return ``X B beta``."""
        return self.X @ (self.basis @ beta)

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """``(X B)^T r``."""
        return self.basis.T @ np.asarray(self._XT @ r).ravel()

    def influence(self, A: np.ndarray) -> Influence:
        """Influence directions ``u_c = A (X B)_c`` in factored form."""
        return Influence(self.X, np.asarray(A) @ self.basis.T)

    def pull_back(self, G: np.ndarray) -> np.ndarray:
        """``B^T G B`` (``G`` symmetric) with ``B`` applied as a sparse matrix.

        Two entries per column for the centering basis, ``O(P^2)`` rather than
        ``O(P^3)``; dense products for small ``P``, where they are faster.
        """
        if self.basis.shape[0] <= _DENSE_PULL_BACK:
            return self.basis.T @ G @ self.basis
        Bt = self._basis_T
        return np.asarray(Bt @ np.asarray(Bt @ G).T).T

    @cached_property
    def _basis_T(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.basis.T)

    @cached_property
    def _XT(self) -> sp.csr_matrix:
        return self.X.T.tocsr()


_DENSE_PULL_BACK = 256
"""Largest ``P`` for which :meth:`Design.pull_back` multiplies densely."""


def centered_design(i: np.ndarray, j: np.ndarray, N: int, a: np.ndarray | None = None) -> Design:
    """``D T``: the item-difference design in the centered chart ``s = T beta``.

    The chart of :func:`centering_basis`, with the order column ``a`` appended when
    given (eq. binomial-model-llm), as a factored :class:`Design`.
    """
    D = difference_design(i, j, N)
    T = centering_basis(N)
    if a is None:
        return Design(D, T, (np.asarray(i), np.asarray(j), None, N))
    X = sp.csr_matrix(sp.hstack([D, sp.csr_matrix(np.asarray(a, float)[:, None])]))
    basis = np.zeros((N + 1, N))
    basis[:N, : N - 1] = T
    basis[N, N - 1] = 1.0
    return Design(X, basis, (np.asarray(i), np.asarray(j), np.asarray(a, float), N))


def pair_information(i: np.ndarray, j: np.ndarray, a: np.ndarray | None, N: int, d: np.ndarray) -> np.ndarray:
    """``X^T diag(d) X`` (the weighted comparison Laplacian, eq. comparison-laplacian).

    For the rows ``e_i - e_j`` (and the order column ``a``) of
    :func:`centered_design`'s ``X``, from the item-pair totals of ``d``: the weighted
    Laplacian ``diag(W 1 + W^T 1) - W - W^T`` of the comparison graph, bordered by
    ``sum_c d_c a_c (e_i - e_j)`` and ``sum_c d_c a_c^2`` (dense ``(N [+1])`` square).
    """
    W: np.ndarray = np.bincount(i * N + j, weights=d, minlength=N * N).reshape(N, N)
    W += W.T.copy()
    W *= -1.0
    W[np.diag_indices(N)] -= W.sum(axis=1)
    if a is None:
        return W
    da = d * a
    col = np.bincount(i, weights=da, minlength=N) - np.bincount(j, weights=da, minlength=N)
    out = np.empty((N + 1, N + 1))
    out[:N, :N] = W
    out[N, :N] = out[:N, N] = col
    out[N, N] = np.sum(da * a)
    return out


def glm_information(X: "np.ndarray | sp.spmatrix | Design", n: np.ndarray, p: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """``weight * X^T diag(n p (1 - p)) X``: the Hessian of the weighted binomial logistic loss.

    It is also its Fisher information, at fitted probabilities ``p`` (dense p x p;
    ``X`` dense, sparse or a factored :class:`Design`).
    """
    d = weight * n * p * (1 - p)
    if isinstance(X, Design):
        if X.pairs is not None and X.pairs[3] ** 2 <= 16 * d.size + 250_000:
            i, j, a, N = X.pairs
            return X.pull_back(pair_information(i, j, a, N, d))
        return X.pull_back(glm_information(X.X, n, p, weight))
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        return np.asarray((X.T @ (sp.diags(d) @ X)).toarray())
    return (X.T * d) @ X


def dense_design(X: "np.ndarray | sp.spmatrix | Design") -> np.ndarray:
    """``X`` as a dense array.

    For the Firth penalty, whose leverages need the full ``m x m`` hat matrix anyway.
    """
    if isinstance(X, Design):
        return np.asarray(X.X @ X.basis)
    return cast(sp.spmatrix, X).toarray() if sp.issparse(X) else np.asarray(X, float)


def _rmatvec(X: "np.ndarray | sp.spmatrix | Design", r: np.ndarray) -> np.ndarray:
    return X.rmatvec(r) if isinstance(X, Design) else np.asarray(X.T @ r).ravel()


def logistic_glm(
    X: "np.ndarray | sp.spmatrix | Design",
    n: np.ndarray,
    y: np.ndarray,
    *,
    weight: float = 1.0,
    ridge: float = 0.0,
    x0: np.ndarray | None = None,
    bound: float = BOX,
    gtol: float = 1e-10,
    penalty: str | None = None,
) -> OptimResult:
    r"""Minimize ``weight * sum_c [n_c log(1+e^{x_c beta}) - y_c x_c beta] + ridge/2 |beta|^2``.

    With ``penalty="firth"`` the term ``-weight/2 log det I(beta)`` is added (the
    Jeffreys prior, :mod:`pydial.penalty`), so the minimizer is Firth's bias-reduced
    estimate, finite whenever ``X`` has full column rank.
    Newton steps with line search inside the box ``|beta_i| <= bound``.
    """
    X = X if (sp.issparse(X) or isinstance(X, Design)) else np.asarray(X, float)
    pen = FirthPenalty(dense_design(X), np.asarray(n, float), weight) if check_penalty(penalty) == "firth" else None

    def value(beta: np.ndarray) -> float:
        f = float(weight * binomial_nll(X @ beta, n, y).sum() + 0.5 * ridge * beta @ beta)
        return f + pen.value(X @ beta) if pen is not None else f

    def fgh(beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        eta = X @ beta
        p = expit(eta)
        f = float(weight * binomial_nll(eta, n, y).sum() + 0.5 * ridge * beta @ beta)
        g = weight * _rmatvec(X, n * p - y) + ridge * beta
        H = glm_information(X, n, p, weight) + ridge * np.eye(X.shape[1])
        if pen is not None:
            fp, gp, Hp = pen.glm_terms(beta)
            f, g, H = f + fp, g + gp, H + Hp
        return f, g, H

    start = np.zeros(X.shape[1]) if x0 is None else np.asarray(x0, float)
    return newton(fgh, start, bound=bound, gtol=gtol, value=value, cholesky=True)


def fit_human_btl(human: HumanCells, N: int, *, ridge: float = 0.0, penalty: str | None = None) -> BTLFit:
    r"""Centered human BTL MLE :math:`\hat s_0` (eq. human-only-estimator), loss normalized by ``n_H``.

    Firth's bias-reduced estimate with ``penalty="firth"``.
    """
    T = centering_basis(N)
    X = centered_design(human.i, human.j, N)
    opt = logistic_glm(X, human.n, human.y, weight=1.0 / float(human.n.sum()), ridge=ridge, penalty=penalty)
    return BTLFit(T @ opt.x, 0.0, opt)


def fit_order_btl(cells: LLMCells, N: int, *, order: bool = True, ridge: float = 0.0,
                  penalty: str | None = None) -> BTLFit:
    r"""One judge's order-effect BTL, ``logit p = s_i - s_j + a b`` (eq. binomial-model-llm).

    With ``order=False`` the order effect is fixed at 0 (plain BTL on the pooled cells);
    ``penalty="firth"`` gives Firth's bias-reduced estimate.
    """
    T = centering_basis(N)
    X = centered_design(cells.i, cells.j, N, cells.a if order else None)
    opt = logistic_glm(X, cells.n, cells.y, weight=1.0 / float(cells.n.sum()), ridge=ridge, penalty=penalty)
    s = T @ opt.x[: N - 1]
    return BTLFit(s, float(opt.x[-1]) if order else 0.0, opt)


def fit_calibration(human: HumanCells, M: np.ndarray, *, x0: np.ndarray | None = None, bound: float = BOX,
                    penalty: str | None = None) -> OptimResult:
    r"""Staged calibration :math:`\hat c = \arg\min_c \ell_H(M c)` (eq. staged-calibrated-estimator).

    With ``penalty="firth"`` the Firth estimate of the calibration GLM (design ``D_H M``).
    """
    X = np.asarray(difference_design(human.i, human.j, M.shape[0]) @ M)
    return logistic_glm(X, human.n, human.y, weight=1.0 / float(human.n.sum()), x0=x0, bound=bound, penalty=penalty)


# ---------------------------------------------------------- structured fits
def initial_theta(data: Comparisons, chart: Chart, *, ridge: float = 1e-3) -> np.ndarray:
    """Start for the structured fit: ridge judge-wise order-effect fits, then an SVD.

    The SVD is the consensus-plus-rank-r SVD of their score matrix (Cond. llm-structure).
    For a calibrated chart the calibration coordinates are the least-squares projection
    of the people's ridge BTL scores on the basis ``M`` (``e_1`` without human data).
    The one start of every structured fit of both engines, and of Stan's NUTS chains
    (jittered, :func:`pydial.stan.standata.dial_sample_inits`).

    The ridge keeps every judge's fit finite even when the judge alone is not
    identified; the structured fit then corrects it.
    """
    N, K = data.N, data.K
    S0 = np.zeros((K, N))
    b0 = np.zeros(K)
    for k in range(K):
        cells = data.llm.select(data.llm.judge == k)
        f = fit_order_btl(cells, N, order=chart.order, ridge=ridge)
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
) -> StructuredFit:
    r"""Minimize :math:`Q_\lambda` (``lam`` finite) or :math:`\ell_L` (``lam = inf``) on the reduced chart.

    ``lam = inf`` goes with ``chart.calibration`` None; the start is ``theta0``.

    Gauge drift is removed after every step by re-expressing the iterate in the
    canonical gauge (same ``(s, S, b)``), so the box bounds act on a fixed
    representative.  ``penalty="firth"`` adds the human block's Jeffreys prior
    (:meth:`Objective.weighted`).
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
    )
    return StructuredFit(chart, res.x, res, obj)
