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

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from pydial.data.comparisons import Comparisons, HumanCells, LLMCells
from pydial.estimation.engines import BTLFit, StructuredFit
from pydial.model.chart import Chart, centering_basis, difference_design, structure_from_S
from pydial.model.design import Design, centered_design, dense_design, glm_information, rmatvec
from pydial.model.likelihood import Objective, binomial_nll
from pydial.model.penalty import FirthPenalty, check_penalty
from pydial.optim import BOX, OptimResult, newton


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
    Jeffreys prior, :mod:`pydial.model.penalty`), so the minimizer is Firth's bias-reduced
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
        g = weight * rmatvec(X, n * p - y) + ridge * beta
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
