r"""Binomial logistic losses of DIAL with exact gradients and Hessians.

* ``human_loss``  -- :math:`\ell_H(s)` of eq. human-full-loss (normalized by ``n_H``);
* ``llm_loss``    -- :math:`\ell_L(S, b)` of eq. llm-negloglik (normalized by ``n_L``);
* :class:`Objective` -- :math:`Q_\lambda = \ell_H + \lambda \ell_L` (eq. weighted-loss)
  on the reduced chart of :mod:`pydial.model`, with value, gradient, Hessian and the
  per-cell pieces needed by the sandwich and GACV.

Every cell ``c`` (LLM or human) has the bilinear predictor
``eta_c = L_g . (B_i - B_j) + a b_g`` in the full coordinates; the loss is
``sum_c w_c [n_c log(1 + e^eta_c) - y_c eta_c]`` with per-comparison weight
``w_c = 1/n_H`` for human and ``lambda/n_L`` for LLM cells.  Each cell touches only
``3(r+1) + 1`` full coordinates, so the Hessian is assembled from small blocks
with one ``bincount`` and mapped to the reduced chart by ``T^T H T``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from .data import Comparisons, HumanCells, LLMCells
from .inference import Influence
from .model import Chart
from .penalty import CalibrationFirthPenalty, check_penalty


def softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` without overflow."""
    return np.logaddexp(0.0, x)


def binomial_nll(eta: np.ndarray, n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-cell ``n log(1 + e^eta) - y eta`` (binomial negative log-likelihood without the
    binomial coefficient)."""
    return n * softplus(eta) - y * eta


def human_loss(s: np.ndarray, human: HumanCells) -> float:
    r"""Normalized human loss :math:`\ell_H(s)` (eq. human-full-loss)."""
    eta = s[human.i] - s[human.j]
    return float(binomial_nll(eta, human.n, human.y).sum() / human.n.sum())


def llm_loss(S: np.ndarray, b: np.ndarray, llm: LLMCells) -> float:
    r"""Normalized LLM loss :math:`\ell_L(S, b)` (eq. llm-negloglik)."""
    eta = S[llm.judge, llm.i] - S[llm.judge, llm.j] + llm.a * b[llm.judge]
    return float(binomial_nll(eta, llm.n, llm.y).sum() / llm.n.sum())


def weighted_loss(s: np.ndarray, S: np.ndarray, b: np.ndarray, data: Comparisons, lam: float) -> float:
    r""":math:`Q_\lambda(s, S, b) = \ell_H(s) + \lambda \ell_L(S, b)` (eq. weighted-loss)."""
    return human_loss(s, data.human) + lam * llm_loss(S, b, data.llm)


def calibration_firth_penalty(data: Comparisons) -> CalibrationFirthPenalty:
    """Jeffreys prior of the human calibration GLM (design ``D_H M``, normalization ``1/n_H``)."""
    from .fit import difference_design

    H = data.human
    return CalibrationFirthPenalty(difference_design(H.i, H.j, data.N).toarray(), H.n.astype(float), 1.0 / data.n_human)


@dataclass(frozen=True)
class Cells:
    """LLM and human cells stacked for the bilinear kernel.

    ``g`` is the loading row (judge ``k``, or ``K`` for the human); ``a`` is 0 for
    human cells; ``w`` is the per-comparison weight of the cell.
    """

    g: np.ndarray
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    n: np.ndarray
    y: np.ndarray
    w: np.ndarray
    is_human: np.ndarray

    @classmethod
    def stack(cls, data: Comparisons, w_llm: float, w_human: float) -> "Cells":
        """LLM cells (if ``w_llm > 0``) followed by human cells (if ``w_human > 0``)."""
        parts = []
        if w_llm > 0:
            L = data.llm
            parts.append((L.judge, L.i, L.j, L.a, L.n, L.y, np.full(L.n.size, w_llm), np.zeros(L.n.size, bool)))
        if w_human > 0:
            H = data.human
            m = H.n.size
            parts.append((np.full(m, data.K), H.i, H.j, np.zeros(m, np.int64), H.n, H.y, np.full(m, w_human), np.ones(m, bool)))
        if not parts:
            raise ValueError("no cells with positive weight")
        cols = [np.concatenate([p[t] for p in parts]) for t in range(8)]
        return cls(*cols)


class Objective:
    r"""A weighted bilinear logistic loss on a :class:`~pydial.model.Chart`.

    ``value(theta) = sum_c w_c [n_c softplus(eta_c) - y_c eta_c]`` where human cells
    carry ``w_human`` and LLM cells ``w_llm``.  With ``w_human = 1/n_H`` and
    ``w_llm = lambda/n_L`` this is :math:`Q_\lambda` (eq. weighted-loss); with
    ``w_human = 0`` and ``w_llm = 1/n_L`` the structured LLM-only loss of
    eq. staged-calibrated-estimator.

    ``penalty`` (a :class:`~pydial.penalty.CalibrationFirthPenalty`, the human block's
    Jeffreys prior) is added to the loss.
    """

    def __init__(self, chart: Chart, cells: Cells, penalty: CalibrationFirthPenalty | None = None) -> None:
        if chart.calibration is None and cells.is_human.any():
            raise ValueError("an LLM-only chart cannot carry human cells")
        self.chart = chart
        self.cells = cells
        self.penalty = penalty

    @classmethod
    def weighted(cls, chart: Chart, data: Comparisons, lam: float, penalty: str | None = None) -> "Objective":
        r""":math:`Q_\lambda` with ``lam`` in ``(0, inf)``; ``lam = inf`` gives the LLM-only loss.

        ``penalty="firth"`` adds the human block's Jeffreys prior
        :math:`-\frac{1}{2 n_H}[\log\det(M^\top D_H^\top W D_H M) - \log\det(M^\top M)]`,
        the information of the calibration coordinates (:mod:`pydial.penalty`).
        """
        if np.isinf(lam):
            return cls(chart, Cells.stack(data, 1.0 / data.n_llm, 0.0))
        pen = calibration_firth_penalty(data) if check_penalty(penalty) == "firth" else None
        return cls(chart, Cells.stack(data, lam / data.n_llm, 1.0 / data.n_human), pen)

    # ----------------------------------------------------------- index maps
    @cached_property
    def _index(self) -> np.ndarray:
        """Full-coordinate indices touched by each cell (m x (3q+1)).

        Columns: L_g (q), B_i (q), B_j (q), b_g (1; a dummy slot for human cells).
        """
        ch, c = self.chart, self.cells
        q = ch.q
        l = np.arange(q)
        bcol = np.where(c.is_human, 0, ch.off_b + np.minimum(c.g, ch.K - 1))
        return np.column_stack(
            [c.g[:, None] * q + l, ch.off_B + c.i[:, None] * q + l, ch.off_B + c.j[:, None] * q + l, bcol]
        )

    @cached_property
    def _order_label(self) -> np.ndarray:
        """``a_c`` as floats, 0 on human cells (no order effect)."""
        c = self.cells
        return np.where(c.is_human, 0.0, c.a.astype(float))

    @cached_property
    def _order_judge(self) -> np.ndarray:
        return np.minimum(self.cells.g, self.chart.K - 1)

    def _local(self, theta: np.ndarray, *, derivative: bool = True) -> tuple[np.ndarray, list[np.ndarray]]:
        """``eta`` and the local gradient ``d eta / d phi`` on the touched coordinates, as
        ``3q + 1`` contiguous columns ``dB_l, L_gl, -L_gl, a`` (the layout of :attr:`_index`)."""
        ch, c = self.chart, self.cells
        phi = ch.to_full(theta)
        q = ch.q
        L = phi[: ch.off_B].reshape(ch.rows, q)
        B = phi[ch.off_B : ch.off_b].reshape(ch.N, q)
        b = phi[ch.off_b :]
        Lg = [np.ascontiguousarray(L[:, l])[c.g] for l in range(q)]
        dB = [B[c.i, l] - B[c.j, l] for l in range(q)]
        eta = self._order_label * b[self._order_judge]
        for l in range(q):
            eta += Lg[l] * dB[l]
        if not derivative:
            return eta, []
        return eta, dB + Lg + [-x for x in Lg] + [self._order_label]

    def eta(self, theta: np.ndarray) -> np.ndarray:
        """Linear predictors ``eta_c`` of the cells (eq. binomial-model-llm / -human)."""
        return self._local(theta, derivative=False)[0]

    # ------------------------------------------------------------ evaluation
    def value(self, theta: np.ndarray) -> float:
        """The weighted loss (``Q_lambda`` of eq. weighted-loss for :meth:`weighted`)."""
        c = self.cells
        eta = self.eta(theta)
        f = float(np.sum(c.w * binomial_nll(eta, c.n, c.y)))
        return f + self.penalty.value(self.chart, theta, eta[c.is_human]) if self.penalty is not None else f

    def value_grad_hess(self, theta: np.ndarray, *, hess: bool = True) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Value, gradient and (exact) Hessian in the reduced chart."""
        ch, c = self.chart, self.cells
        eta, v = self._local(theta)
        p = expit(eta)
        f = float(np.sum(c.w * binomial_nll(eta, c.n, c.y)))
        res = c.w * (c.n * p - c.y)  # d f / d eta per cell
        if self.penalty is not None:
            J = self.cell_jacobian(theta, rows=c.is_human) if hess else None
            fp, gp, g_pen, H_pen = self.penalty.terms(ch, theta, eta[c.is_human], J, hess=hess)
            f += fp
            res = res.copy()
            res[c.is_human] += gp
        idx = self._index
        P = ch.dim_full
        g_full = np.zeros(P)
        for t, col in enumerate(v):
            g_full += np.bincount(idx[:, t], weights=res * col, minlength=P)
        g = np.asarray(ch.T_sparse.T @ g_full)
        if self.penalty is not None:
            g = g + g_pen
        if not hess:
            return f, g, None
        curv = c.w * c.n * p * (1.0 - p)
        H_full = self._outer(curv, v) + self._cross(res)
        H = ch.pull_back(H_full)
        if self.penalty is not None:
            H = H + H_pen
        return f, g, 0.5 * (H + H.T)

    @cached_property
    def _groups(self) -> list[tuple[np.ndarray, int, int, int, int, int]]:
        """The four coordinate groups a cell touches: ``(unit, n_units, base, stride, width, vcol)``,
        the full coordinate of entry ``l`` being ``base + unit * stride + l`` and its
        derivative ``v[:, vcol + l]`` (loadings ``L_g``, ``B_i``, ``B_j``, order ``b_g``)."""
        ch, c = self.chart, self.cells
        q = ch.q
        return [
            (c.g, ch.rows, 0, q, q, 0),
            (c.i, ch.N, ch.off_B, q, q, q),
            (c.j, ch.N, ch.off_B, q, q, 2 * q),
            (np.minimum(c.g, ch.K - 1), ch.K, ch.off_b, 1, 1, 3 * q),
        ]

    @cached_property
    def _pair_keys(self) -> dict[tuple[int, int], np.ndarray]:
        """Per pair of coordinate groups, the key ``unit_a * n_units_b + unit_b`` of every cell."""
        gr = self._groups
        return {(a, b): gr[a][0] * gr[b][1] + gr[b][0] for a in range(len(gr)) for b in range(a, len(gr))}

    def _outer(self, weight: np.ndarray, v: list[np.ndarray]) -> np.ndarray:
        """``sum_c weight_c v_c v_c^T`` assembled into the full coordinates.

        Each pair of coordinate groups is first summed over the cells that share its
        units (judge, item, item pair) with ``bincount``; the dense matrix is only
        ``P x P``, and no ``cells x (3q+1)^2`` array is formed.
        """
        P = self.chart.dim_full
        H = np.zeros((P, P))
        gr = self._groups
        keys = self._pair_keys
        for a in range(len(gr)):
            _, na, ba, sa, wa, ca = gr[a]
            for b in range(a, len(gr)):
                _, nb, bb, sb, wb, cb = gr[b]
                key = keys[(a, b)]
                for la in range(wa):
                    wv = weight * v[ca + la]
                    ra = ba + np.arange(na) * sa + la
                    for lb in range(la if a == b else 0, wb):
                        agg = np.bincount(key, weights=wv * v[cb + lb], minlength=na * nb).reshape(na, nb)
                        rb = bb + np.arange(nb) * sb + lb
                        H[np.ix_(ra, rb)] += agg
                        if b != a or lb != la:
                            H[np.ix_(rb, ra)] += agg.T
        return H

    def _cross(self, res: np.ndarray) -> np.ndarray:
        """``sum_c res_c d^2 eta_c / d phi^2``: +1 at (L_g,l ; B_i,l), -1 at (L_g,l ; B_j,l)."""
        ch, c = self.chart, self.cells
        q, P = ch.q, ch.dim_full
        H = np.zeros((P, P))
        agg = (np.bincount(c.g * ch.N + c.i, weights=res, minlength=ch.rows * ch.N)
               - np.bincount(c.g * ch.N + c.j, weights=res, minlength=ch.rows * ch.N)).reshape(ch.rows, ch.N)
        for l in range(q):
            rl = np.arange(ch.rows) * q + l
            rb = ch.off_B + np.arange(ch.N) * q + l
            H[np.ix_(rl, rb)] += agg
            H[np.ix_(rb, rl)] += agg.T
        return H

    # --------------------------------------------------- per-cell quantities
    def full_jacobian(self, theta: np.ndarray, rows: np.ndarray | None = None) -> sp.csr_matrix:
        """``d eta_c / d phi`` in the full coordinates: sparse, exactly ``3(r+1)+1``
        entries per cell (every cell, or those selected by the boolean mask ``rows``)."""
        v = np.column_stack(self._local(theta)[1])
        idx = self._index
        if rows is not None:
            v, idx = v[rows], idx[rows]
        m, q = v.shape
        return sp.csr_matrix((v.ravel(), idx.ravel(), np.arange(0, m * q + 1, q)), shape=(m, self.chart.dim_full))

    def cell_jacobian(self, theta: np.ndarray, rows: np.ndarray | None = None) -> sp.csr_matrix:
        """``d eta_c / d theta`` for every cell, or the cells selected by the boolean
        mask ``rows``: a sparse (m x dim) matrix, :meth:`full_jacobian` mapped by ``T``.

        Rows of cells touching the last judge or item are dense in ``theta`` (the
        eliminated coordinates are minus sums); products over many cells are better
        formed with :meth:`influence`, which stays in the full coordinates.
        """
        return (self.full_jacobian(theta, rows) @ self.chart.T_sparse).tocsr()

    def influence(self, theta: np.ndarray, A: np.ndarray, coords: slice | np.ndarray = slice(None),
                  rows: np.ndarray | None = None) -> Influence:
        """Influence directions ``u_c = A d eta_c / d theta[coords]`` of the cells, factored in
        the full coordinates: ``J = d eta / d phi`` and ``A T[:, coords]^T``."""
        Tc = self.chart.T[:, coords]
        return Influence(self.full_jacobian(theta, rows), np.asarray(A) @ Tc.T)

    def probabilities(self, theta: np.ndarray) -> np.ndarray:
        """Fitted probabilities ``sigma(eta_c)`` that item ``i`` wins."""
        return expit(self.eta(theta))

    def cell_scores(self, theta: np.ndarray) -> sp.csr_matrix:
        """Per-cell score contributions ``w_c (n_c p_c - y_c) d eta_c / d theta`` (sparse m x dim).

        They sum to the gradient; per-comparison scores follow by dividing by
        ``w_c`` and splitting the residual over the ``n_c`` comparisons.
        """
        c = self.cells
        p = self.probabilities(theta)
        return (sp.diags(c.w * (c.n * p - c.y)) @ self.cell_jacobian(theta)).tocsr()
