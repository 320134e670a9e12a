r"""The weighted loss of DIAL on the reduced chart with exact gradients and Hessians (:class:`Objective`).

:math:`Q_\lambda = \ell_H + \lambda \ell_L` (eq. weighted-loss) of any outcome family.  Every cell has
the bilinear predictor ``eta_c = L_g . (B_i - B_j) + a b_g (+ z' beta)`` and touches ``3(r+1) + 1 (+ p)``
full coordinates, so the Hessian is assembled from per-cell totals and mapped back by ``T^T H T``.
"""

from __future__ import annotations

import functools
from functools import cached_property
from typing import Any, Callable, Iterator, Literal, TypeVar, overload

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from pydial.data.comparisons import Comparisons
from pydial.model.blocks import blocks, ordered_map, scratch
from pydial.model.chart import Chart, difference_design
from pydial.model.cells import Cells, family_totals, free_groups, human_counts, human_table, key_segments
from pydial.model.cells import tie_groups, tie_totals  # noqa: F401 (re-exported)
from pydial.model.families import BINARY, CellDerivatives, Family, binary_cell, family_of
from pydial.model.penalty import CalibrationFirthPenalty, central_hessian, check_penalty
from pydial.exceptions import ArgumentError


T = TypeVar("T")


def _layout(per_cell: bool = False) -> Callable[[Callable[[Any], T]], "cached_property[T]"]:
    """Make a cached property kept in the cells' :attr:`Cells.layout`, shared by the objectives on the same cells.

    ``per_cell``: a per-cell array, of which a slice of a stack takes the slice of the stack's.
    """

    def make(func: Callable[[Any], T]) -> "cached_property[T]":
        name = func.__name__

        @functools.wraps(func)
        def get(self: Any) -> T:
            ch, lay, src = self.chart, self.cells.layout, self.cells.source
            key = (name, ch.N, ch.K)
            if key in lay:
                return lay[key]
            if per_cell and src is not None:
                shell = Objective.__new__(Objective)  # the stack's layout arrays alone (not checked against the chart)
                shell.chart, shell.cells = ch, src[0]
                whole = getattr(shell, name)
                lay[key] = None if whole is None else (tuple(x[src[1]] for x in whole) if isinstance(whole, tuple)
                                                      else whole[src[1]])
            else:
                lay[key] = func(self)
            return lay[key]

        return cached_property(get)

    return make


OffsetWeights = tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray]]
"""``(wx, wxx)`` of :meth:`Objective._outer`: per-cell weights of the offsets' entries (cross, and pairwise)."""

DENSE_PAIR_RATIO = 16  # per-judge item-pair tables when they have at most this many entries per cell
PAIR_CHUNK_ENTRIES = 1 << 22  # entries of the item-pair tables formed at once (32 MB)
TABLE_RATIO = 3
"""Largest number of per-judge item-pair table entries per cell for which the factored Hessian
forms the tables ``W_g``; beyond it the totals over the cells are faster (measured: tables 1.5x
faster at 2.1 entries per cell, N = 300; cell totals 3x faster at 5.7, N = 1,000)."""


def _add_totals(out: np.ndarray, totals: tuple[np.ndarray | None, np.ndarray]) -> None:
    keys, sums = totals
    if keys is None:
        out += sums
    elif keys.size:
        out[keys] += sums


class Objective:
    r"""The weighted loss ``sum_c w_c loss_c`` of the bilinear model on a :class:`~pydial.model.chart.Chart`, for a family.

    ``loss_c`` is minus the family's cell kernel (:mod:`pydial.model.families`; binary: ``n softplus(eta) - y eta``).
    With ``w = 1/n_H`` on the human cells and ``lambda/n_L`` on the LLM cells it is :math:`Q_\lambda`
    (eq. weighted-loss; :meth:`weighted`), plus ``penalty``, the people's Jeffreys prior.  The coordinates are
    ``x = (theta, l)``: the chart's, then the log tie parameters of the groups ``free`` (judges, then the
    people); the other groups must have no ties and follow the binary model (``nu = 0``, :func:`tie_groups`).
    """

    def __init__(self, chart: Chart, cells: Cells, penalty: CalibrationFirthPenalty | None = None, *,
                 ties: "str | None | Family" = None, free: "np.ndarray | list[int] | None" = None) -> None:
        if chart.calibration is None and cells.is_human.any():
            raise ArgumentError("an LLM-only chart cannot carry human cells")
        if (cells.z.shape[1] if cells.z is not None else 0) != chart.p:
            raise ArgumentError(f"the cells carry {0 if cells.z is None else cells.z.shape[1]} covariates, the chart "
                                f"{chart.p} (Chart(..., p=data.p))")
        self.chart = chart
        self.cells = cells
        self.penalty = penalty
        self._last: tuple[bytes, np.ndarray, float] | None = None  # (theta, eta, loss) of the last evaluation
        self.family = family = family_of(ties)
        self.free = np.zeros(0, np.int64)
        if penalty is not None and penalty.family is not family:
            raise ArgumentError(f"the penalty is of the {penalty.family.name} family, the objective of {family.name}")
        if family.is_binary:
            if cells.outcome_counts is not None and np.any(cells.outcome_counts[:, 2] > 0):
                raise ArgumentError("the cells hold ties: give their family (ties='davidson' or 'rao-kupper')")
            return
        if cells.outcome_counts is None:
            raise ArgumentError("a tie family needs the tie cells (Cells.stack(..., with_ties=True))")
        tied = cells.counts[:, 2] > 0
        free = np.unique(np.asarray(np.unique(cells.g[tied]) if free is None else free, np.int64))
        if free.size and (free.min() < 0 or free.max() >= chart.rows):
            raise ArgumentError(f"free tie groups must lie in 0..{chart.rows - 1}, got {free.tolist()}")
        self.free = free
        bad = tied & (self._lpos < 0)
        if bad.any():
            raise ArgumentError(f"cells of groups {sorted(set(cells.g[bad].tolist()))} have ties but no free tie parameter")

    @classmethod
    def weighted(cls, chart: Chart, data: Comparisons, lambda_: float, penalty: str | None = None, *,
                 ties: "str | None | Family" = None, free: "np.ndarray | None" = None) -> "Objective":
        r""":math:`Q_\lambda` (eq. weighted-loss) of ``ties``' family; ``lambda_ = inf``: the LLM-only loss, 0: the human block.

        The weights count a tie family's ties (:func:`~pydial.model.cells.family_totals`); ``free`` defaults to
        :func:`tie_groups`; ``penalty="firth"`` adds the people's Jeffreys prior in the calibration coordinates
        (:class:`~pydial.model.penalty.CalibrationFirthPenalty` of design ``[D_H M, Z_H]``, weight ``1/n_H``).
        """
        fam = family_of(ties)
        n_l, n_h = family_totals(data, fam)
        free = free_groups(data, chart, fam) if free is None else free
        pen = None
        if not np.isinf(lambda_) and check_penalty(penalty) == "firth":
            H = human_table(data, fam)
            pen = CalibrationFirthPenalty(difference_design(H.i, H.j, data.N).toarray(), human_counts(data, fam).sum(axis=1),
                                          1.0 / n_h, data.effect_columns(H.z, data.K), fam)
        w_l, w_h = (1.0 / n_l, 0.0) if np.isinf(lambda_) else (lambda_ / n_l, 1.0 / n_h)
        return cls(chart, Cells.stack(data, w_l, w_h, with_ties=not fam.is_binary), pen, ties=fam, free=free)

    # ----------------------------------------------------------- coordinates
    @cached_property
    def _lpos(self) -> np.ndarray:
        """Position of each cell's log tie parameter in ``l`` (``-1``: its group is binary, ``nu = 0``)."""
        pos = np.full(self.chart.rows, -1, np.int64)
        pos[self.free] = np.arange(self.free.size)
        return pos[self.cells.g]

    @property
    def n_tie(self) -> int:
        """Number of free log tie parameters (0 for the binary family)."""
        return int(self.free.size)

    @property
    def dim(self) -> int:
        """Dimension of ``x = (theta, l)``: the chart's, then the free log tie parameters."""
        return self.chart.dim + self.n_tie

    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(theta, l)`` of ``x``."""
        x = np.asarray(x, float)
        return x[: self.chart.dim], x[self.chart.dim:]

    def log_nu(self, x: np.ndarray) -> np.ndarray:
        """``log nu`` of every loading row (``-inf`` for the groups fixed at ``nu = 0``)."""
        out = np.full(self.chart.rows, -np.inf)
        out[self.free] = self.split(x)[1]
        return out

    @cached_property
    def T_ext(self) -> sp.csr_matrix:
        """``d (phi, l) / d x``: the chart's ``T`` and the identity on ``l`` (sparse)."""
        return sp.block_diag([self.chart.T_sparse, sp.identity(self.n_tie)], format="csr")

    # ----------------------------------------------------------- index maps
    @cached_property
    def _index(self) -> np.ndarray:
        """Full-coordinate indices touched by each cell: ``L_g`` (q), ``B_i`` (q), ``B_j`` (q), ``b_g`` (1), ``beta`` (p)."""
        return self._index_array(np.int64)

    def _index_array(self, dtype: Any) -> np.ndarray:
        """:attr:`_index` with integers of type ``dtype``, not cached (the :attr:`_groups`; ``b`` of human cells at 0)."""
        ch = self.chart
        idx = np.empty((self.cells.g.size, 3 * ch.q + 1 + ch.p), dtype)
        for unit, _, base, stride, width, col in self._groups:
            idx[:, col : col + width] = unit[:, None] * stride + (base + np.arange(width))
        idx[self.cells.is_human, 3 * ch.q] = 0
        return idx

    @_layout(per_cell=True)
    def _order_label(self) -> np.ndarray:
        """``a_c`` as floats, 0 on human cells (no order effect)."""
        return np.where(self.cells.is_human, 0.0, self.cells.a.astype(float))

    @_layout(per_cell=True)
    def _order_judge(self) -> np.ndarray:
        return np.minimum(self.cells.g, self.chart.K - 1)

    @cached_property
    def _beta_unit(self) -> np.ndarray:
        """The row of ``beta`` of each cell (:attr:`Chart.beta_row` of its loading row; not shared between charts)."""
        return self.chart.beta_row[self.cells.g] if self.chart.p else np.zeros(self.cells.g.size, np.int64)

    @cached_property
    def _covariates(self) -> list[np.ndarray]:
        z = self.cells.z
        return [] if z is None else [np.ascontiguousarray(z[:, l], dtype=float) for l in range(z.shape[1])]

    @property
    def _offsets(self) -> list[tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]]:
        r"""Return the coordinates entering ``eta`` linearly ``b``, ``beta``: ``(x_c, unit_c, units, coordinates, row units)``."""
        ch, K = self.chart, self.chart.K
        order = (self._order_label, self._order_judge, K, ch.off_b + np.arange(K), np.minimum(np.arange(ch.rows), K - 1))
        return [order] + [(z, self._beta_unit, ch.beta_rows, ch.off_beta + np.arange(ch.beta_rows) * ch.p + l, ch.beta_row)
                          for l, z in enumerate(self._covariates)]

    def _columns(self, phi: np.ndarray) -> list[np.ndarray]:
        """Return the ``3q + 1 + p`` columns ``dB_l, L_gl, -L_gl, a, z`` of ``d eta / d phi`` (layout of :attr:`_index`)."""
        ch, c = self.chart, self.cells
        q = ch.q
        L = phi[: ch.off_B].reshape(ch.rows, q)
        B = phi[ch.off_B : ch.off_b].reshape(ch.N, q)
        Lg = [np.ascontiguousarray(L[:, l])[c.g] for l in range(q)]
        dB = [B[c.i, l] - B[c.j, l] for l in range(q)]
        return dB + Lg + [-x for x in Lg] + [self._order_label] + self._covariates

    def eta(self, theta: np.ndarray) -> np.ndarray:
        """Linear predictors ``eta_c`` of the cells (eq. binomial-model-llm / -human)."""
        return self._eta_full(self.chart.to_full(theta))

    def _eta_full(self, phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``eta_c`` from the full coordinates ``phi`` into ``out`` if given: ``S_gi - S_gj`` with ``S = L B^T``, plus offsets."""
        ch = self.chart
        q = ch.q
        S = (phi[: ch.off_B].reshape(ch.rows, q) @ phi[ch.off_B : ch.off_b].reshape(ch.N, q).T).ravel()
        ki, kj = self._row_item_keys
        b = phi[ch.off_b : ch.off_beta]
        beta = [np.ascontiguousarray(col) for col in phi[ch.off_beta:].reshape(ch.beta_rows, ch.p).T]
        zs, unit = self._covariates, self._beta_unit
        key = self._order_key
        ab = np.concatenate([b, -b, [0.0]])
        eta = np.empty(ki.size) if out is None else out
        judge, label = self._order_judge, self._order_label  # formed with the key: read here, not in the threads

        def block(_: int, sl: slice) -> None:  # valid indices: mode "clip" skips numpy's bounds check
            e, t = eta[sl], scratch(sl)[0]
            np.take(S, ki[sl], out=e, mode="clip")
            e -= np.take(S, kj[sl], out=t, mode="clip")
            if key is None:
                np.take(b, judge[sl], out=t, mode="clip")
                t *= label[sl]
            else:
                np.take(ab, key[sl], out=t, mode="clip")
            e += t
            for z, be in zip(zs, beta):
                np.take(be, unit[sl], out=t, mode="clip")
                t *= z[sl]
                e += t

        for _ in self._map_blocks(block):
            pass
        return eta

    @cached_property
    def _blocks(self) -> list[slice]:
        return blocks(self.cells.g.size)

    def _map_blocks(self, fn: Callable[[int, slice], T]) -> Iterator[T]:
        """Yield ``fn(t, block t)`` in block order, the blocks on the cores (:func:`pydial.model.blocks.ordered_map`)."""
        bl = self._blocks
        return ordered_map(lambda t: fn(t, bl[t]), len(bl), self.cells.g.size)

    @_layout()
    def _row_segments(self) -> "list[tuple[np.ndarray, np.ndarray]] | None":
        return key_segments(self.cells.g, self._blocks)

    @_layout()
    def _row_item_segments(self) -> "list[tuple[np.ndarray, np.ndarray]] | None":
        """Return the runs of equal ``g N + i`` in each block (:func:`key_segments`; the cells are stored sorted by it)."""
        return key_segments(self._row_item_keys[0], self._blocks)

    def _block_totals(self, key: np.ndarray, segments: "list[tuple[np.ndarray, np.ndarray]] | None", t: int,
                      values: np.ndarray, size: int) -> tuple[np.ndarray | None, np.ndarray]:
        """Return the totals of ``values`` (block ``t``) by ``key``: over runs of a sorted key, else by ``bincount``.

        ``(keys, sums)``, or ``(None, bincount of size)``: formed on a block's thread, added in order by :func:`_add_totals`.
        """
        if segments is None:
            return None, np.bincount(key[self._blocks[t]], weights=values, minlength=size)
        keys, starts = segments[t]
        return keys, (np.add.reduceat(values, starts) if keys.size else values[:0])

    @_layout(per_cell=True)
    def _order_key(self) -> np.ndarray | None:
        """Position of ``a_c b_g`` in ``[b, -b, 0]`` (``None`` when some order label is not -1, 0 or +1)."""
        K = self.chart.K
        a = self._order_label
        if not np.all((a == 1.0) | (a == -1.0) | (a == 0.0)):
            return None
        return np.where(a == 0.0, 2 * K, np.where(a > 0.0, 0, K) + self._order_judge)

    # ------------------------------------------------------------ evaluation
    def value(self, x: np.ndarray) -> float:
        """Evaluate the weighted loss (``Q_lambda`` of eq. weighted-loss for :meth:`weighted`) at ``x``, penalty included.

        The predictors and the loss of the last point are kept for :meth:`value_grad_hess` at the
        same point (a step accepted by the line search).
        """
        eta, f = self._eta_loss(x)
        pen = self.penalty
        if pen is None:
            return f
        if pen.family.is_binary:  # the binary family's closed form (pydial.model.penalty)
            return f + pen.value(self.chart, self.split(x)[0], eta[self.cells.is_human])
        return f + self._tie_penalty_terms(x, hess=False)[0]

    def _eta_loss(self, x: np.ndarray, phi: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """``eta`` and the loss without penalty at ``x`` (the family's kernel), from the last evaluation when at ``x``."""
        key = np.asarray(x, float).tobytes()
        if self._last is None or self._last[0] != key:
            # into the work array: the cache holds the last point only, whose predictors are overwritten here
            # (the cache is emptied first: an evaluation interrupted part-way must not leave it naming them)
            self._last = None
            eta = self._eta_full(self.chart.to_full(self.split(x)[0]) if phi is None else phi, out=self._work[0])
            self._last = (key, eta, self.family.loss(self, x, eta))
        return self._last[1], self._last[2]

    @cached_property
    def _work(self) -> list[np.ndarray]:
        """Per-cell work arrays ``[eta, residual, curvature]``, allocated once and reused."""
        return [np.empty(self.cells.g.size) for _ in range(3)]

    @cached_property
    def _hess_work(self) -> tuple[np.ndarray, np.ndarray]:
        """Work arrays of :meth:`value_grad_hess`: the full Hessian (``P x P``) and ``T^T H`` (``dim x P``)."""
        P = self.chart.dim_full
        return np.empty((P, P)), np.empty((self.chart.dim, P))

    @cached_property
    def _wn(self) -> np.ndarray:
        """``w_c n_c``: the cell weights of the binary curvature ``w n p (1 - p)``."""
        return self.cells.w * self.cells.n

    @overload
    def value_grad_hess(self, x: np.ndarray, *, hess: Literal[True] = ...) -> tuple[float, np.ndarray, np.ndarray]: ...

    @overload
    def value_grad_hess(self, x: np.ndarray, *, hess: bool) -> tuple[float, np.ndarray, np.ndarray | None]: ...

    def value_grad_hess(self, x: np.ndarray, *, hess: bool = True) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Value, gradient and exact Hessian in ``x = (theta, l)``: the family's per-cell terms by the chain rule."""
        ch = self.chart
        phi = ch.to_full(self.split(x)[0])
        eta, f = self._eta_loss(x, phi)
        t = self.family.terms(self, x, eta, hess)
        pen = self._penalty_terms(x, eta, t.d_eta, hess) if self.penalty is not None else None
        agg = self._residual_by_item(t.d_eta)
        g = np.asarray(ch.T_sparse.T @ self._gradient_factored(t.d_eta, phi, agg))
        nt = self.n_tie
        pos = self._lpos if nt else None
        if pos is not None:
            assert t.d_l is not None  # a tie family's terms
            g = np.concatenate([g, np.bincount(pos[pos >= 0], weights=t.d_l[pos >= 0], minlength=nt)])
        if pen is not None:
            f, g = f + pen[0], g + pen[1]
        if not hess:
            return f, g, None
        assert t.d_eta_eta is not None
        v = self._columns(phi) if nt else None
        work = self._hess_work  # reused: a fresh dense P x P array costs its page faults at every step
        H_full = self._outer(t.d_eta_eta, v, phi, out=work[0])
        self._add_cross(H_full, agg)
        H = ch.pull_back(H_full, work=(work[1], work[0]))
        if pos is not None:
            assert v is not None and t.d_eta_l is not None and t.d_l_l is not None
            H_tl = np.asarray(ch.T_sparse.T @ self._cross_l(t.d_eta_l, v))
            H_ll = np.diag(np.bincount(pos[pos >= 0], weights=t.d_l_l[pos >= 0], minlength=nt))
            H = np.block([[H, H_tl], [H_tl.T, H_ll]])
        if pen is not None and pen[2] is not None:
            H = H + pen[2]
        H_sym = H + H.T
        H_sym *= 0.5
        return f, g, H_sym

    def _penalty_terms(self, x: np.ndarray, eta: np.ndarray, d_eta: np.ndarray,
                       hess: bool) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Return the penalty's value, gradient and Hessian at ``x``; the binary closed form adds ``dP/d eta`` to ``d_eta``."""
        pen, hum = self.penalty, self.cells.is_human
        assert pen is not None
        if not pen.family.is_binary:
            return self._tie_penalty_terms(x, hess=hess)
        theta = self.split(x)[0]
        fp, gp, g_pen, H_pen = pen.terms(self.chart, theta, eta[hum], self.cell_jacobian(theta, rows=hum) if hess else None,
                                         hess=hess)
        d_eta[hum] += gp
        return fp, g_pen, H_pen

    # ------------------------------------------------------ per-cell family
    def cell_derivatives(self, x: np.ndarray, eta: np.ndarray | None = None) -> CellDerivatives:
        """Per-cell log-likelihood kernel and its derivatives in ``(eta, l)`` (:mod:`pydial.model.families`)."""
        theta, l = self.split(x)
        eta = self.eta(theta) if eta is None else eta
        pos = self._lpos
        free = pos >= 0
        lc = np.where(free, l[np.maximum(pos, 0)] if l.size else 0.0, 0.0)
        d = self.family.cell(self.cells.counts, eta, lc)
        if not free.all():
            fx = ~free
            db = binary_cell(self.cells.counts[fx], eta[fx])
            for name in ("value", "d_eta", "d_l", "d_eta_eta", "d_eta_l", "d_l_l"):
                getattr(d, name)[fx] = getattr(db, name)
        return d

    def outcome_derivatives(self, x: np.ndarray, eta: np.ndarray | None = None
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return per cell and outcome (``i``, ``j``, tie) ``P``, ``a = d log P / d eta``, ``b = d log P / d l``, each ``(m, 3)``.

        The single-comparison scores of the sandwich and GACV (cells at ``nu = 0``: binary, no tie outcome).
        """
        eta = self.eta(self.split(x)[0]) if eta is None else eta
        free = self._lpos >= 0
        l = self.log_nu(x)[self.cells.g]
        P, a, b = np.zeros((eta.size, 3)), np.zeros((eta.size, 3)), np.zeros((eta.size, 3))
        for rows, fam, lr in ((free, self.family, l[free]), (~free, BINARY, 0.0)):  # cells at nu = 0: binary
            if rows.any():
                P[rows] = fam.probabilities(eta[rows], lr)
                a[rows], b[rows] = fam.outcome_terms(eta[rows], lr)[1:3]
        return P, a, b

    @cached_property
    def human_part(self) -> "Objective":
        """Return the objective of the human cells alone (a view when, as stacked, they come last)."""
        h = self.cells.is_human
        k = h.size - int(h.sum())
        rows = slice(k, None) if h[k:].all() else h
        return Objective(self.chart, self.cells.select(rows), ties=self.family, free=self.free)

    def _tie_penalty_terms(self, x: np.ndarray, *, hess: bool) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Value, exact gradient and central-difference Hessian (on the coordinates it touches) of a tie family's penalty."""
        pen, ch, hum = self.penalty, self.chart, self.human_part
        assert pen is not None
        k = np.flatnonzero(self.free == ch.K)

        def grad(z: np.ndarray) -> tuple[float, np.ndarray]:
            theta, l = self.split(z)
            f, g_theta, g_l = pen.value_grad(ch, theta, hum.eta(theta), float(l[k[0]]) if k.size else None,
                                             hum.cell_jacobian(theta))
            g = np.zeros(self.dim)
            g[: ch.dim] = g_theta
            if k.size:
                g[ch.dim + k[0]] = g_l
            return f, g

        f, g = grad(x)
        if not hess:
            return f, g, None
        theta = self.split(x)[0]
        touched = np.abs(CalibrationFirthPenalty.basis(ch, theta)[1]).sum(axis=(1, 2)) > 0
        touched[np.unique(hum.cell_jacobian(theta).indices)] = True
        active = np.concatenate([np.flatnonzero(touched), ch.dim + k])
        return f, g, central_hessian(lambda z: grad(z)[1], x, active)

    def _cross_l(self, weight: np.ndarray, v: list[np.ndarray]) -> np.ndarray:
        """``sum_c weight_c (d eta_c / d phi) e_{l(c)}^T`` (``P x n_tie``, the ``(eta, l)`` cross terms)."""
        P, nt = self.chart.dim_full, self.n_tie
        free = self._lpos >= 0
        idx, pos = self._index[free], self._lpos[free]
        out = np.zeros(P * nt)
        for t, col in enumerate(v):
            out += np.bincount(idx[:, t] * nt + pos, weights=weight[free] * col[free], minlength=P * nt)
        return out.reshape(P, nt)

    @cached_property
    def _groups(self) -> list[tuple[np.ndarray, int, int, int, int, int]]:
        """Return the coordinate groups of a cell, ``(unit, units, base, stride, width, vcol)``: ``base + unit stride + l``."""
        ch, c = self.chart, self.cells
        q = ch.q
        out = [(c.g, ch.rows, 0, q, q, 0), (c.i, ch.N, ch.off_B, q, q, q), (c.j, ch.N, ch.off_B, q, q, 2 * q),
               (self._order_judge, ch.K, ch.off_b, 1, 1, 3 * q)]
        if ch.p:
            out.append((self._beta_unit, ch.beta_rows, ch.off_beta, ch.p, ch.p, 3 * q + 1))
        return out

    @cached_property
    def _pair_keys(self) -> dict[tuple[int, int], np.ndarray]:
        gr = self._groups
        return {(a, b): gr[a][0] * gr[b][1] + gr[b][0] for a in range(len(gr)) for b in range(a, len(gr))}

    def _outer(self, weight: np.ndarray, v: list[np.ndarray] | None, phi: np.ndarray | None = None,
               offset: "OffsetWeights | None" = None, out: np.ndarray | None = None) -> np.ndarray:
        """``sum_c weight_c v_c v_c^T`` (``v_c = d eta_c / d phi``), from item-pair totals or by ``bincount`` per group pair.

        ``offset = (wx, wxx)`` replaces the offsets' entries by cluster sums (:meth:`CellJacobian.cluster_gram`);
        ``out``: a ``P x P`` array to form it in.
        """
        P = self.chart.dim_full
        H = np.zeros((P, P)) if out is None else out
        if out is not None:
            H.fill(0.0)
        if phi is not None and self._pair_chunks is not None:
            return self._outer_factored(weight, phi, H, offset)
        if v is None:
            assert phi is not None, "_outer needs v or phi"
            v = self._columns(phi)
        nb = 3 * self.chart.q  # the derivative columns before the offsets' (a, z)

        def product(ta: int, tb: int) -> np.ndarray:
            ua, ub = ta - nb, tb - nb
            if offset is None or (ua < 0 and ub < 0):
                return weight * v[ta] * v[tb]
            if ua >= 0 and ub >= 0:
                return offset[1][(min(ua, ub), max(ua, ub))]
            return offset[0][max(ua, ub)] * v[min(ta, tb)]

        gr = self._groups
        keys = self._pair_keys
        for a in range(len(gr)):
            _, na, ba, sa, wa, ca = gr[a]
            for b in range(a, len(gr)):
                _, nb_, bb, sb, wb, cb = gr[b]
                for la in range(wa):
                    ra = ba + np.arange(na) * sa + la
                    for lb in range(la if a == b else 0, wb):
                        agg = np.bincount(keys[(a, b)], weights=product(ca + la, cb + lb), minlength=na * nb_).reshape(na, nb_)
                        rb = bb + np.arange(nb_) * sb + lb
                        H[np.ix_(ra, rb)] += agg
                        if b != a or lb != la:
                            H[np.ix_(rb, ra)] += agg.T
        return H

    # ------------------------------------- factored gradient and Hessian
    @cached_property
    def _pair_chunks(self) -> list[tuple[int, int, slice]] | None:
        """Return the loading rows in chunks ``(g0, g1, cells)`` for :meth:`_outer_factored`; ``None`` when too sparse."""
        ch, c = self.chart, self.cells
        N2 = ch.N * ch.N
        if ch.rows * N2 > DENSE_PAIR_RATIO * max(c.g.size, 1):
            return None
        bounds = self._row_bounds
        per = max(1, PAIR_CHUNK_ENTRIES // N2)
        return [(g0, min(g0 + per, ch.rows), slice(int(bounds[g0]), int(bounds[min(g0 + per, ch.rows)])))
                for g0 in range(0, ch.rows, per)]

    @_layout()
    def _pair_order(self) -> np.ndarray | None:
        g = self.cells.g
        return None if g.size < 2 or bool(np.all(g[1:] >= g[:-1])) else np.argsort(g, kind="stable")

    @cached_property
    def _row_bounds(self) -> np.ndarray:
        """Start of each loading row's run of cells (``rows + 1`` bounds) in the order of :attr:`_pair_order`."""
        g = self.cells.g if self._pair_order is None else self.cells.g[self._pair_order]
        return np.searchsorted(g, np.arange(self.chart.rows + 1))

    @_layout()
    def _pair_key(self) -> np.ndarray:
        ch, c = self.chart, self.cells
        key = (c.g * ch.N + c.i) * ch.N + c.j
        return key if self._pair_order is None else key[self._pair_order]

    @_layout(per_cell=True)
    def _item_pair_key(self) -> np.ndarray:
        return self.cells.i * self.chart.N + self.cells.j

    @_layout(per_cell=True)
    def _row_item_keys(self) -> tuple[np.ndarray, np.ndarray]:
        ch, c = self.chart, self.cells
        return c.g * ch.N + c.i, c.g * ch.N + c.j

    def _outer_factored(self, weight: np.ndarray, phi: np.ndarray, H: np.ndarray,
                        offset: "OffsetWeights | None" = None) -> np.ndarray:
        """Form :meth:`_outer` from per-judge item-pair totals ``W_g`` of ``weight`` (Laplacians ``Lap_g`` of ``W_g + W_g^T``).

        ``(L_g, L_g) = B^T Lap_g B``, ``(L_gl', B_il) = L_gl (Lap_g B)_il'``, ``(B_l, B_l') = sum_g L_gl L_gl' Lap_g``.
        """
        ch = self.chart
        q, N, R = ch.q, ch.N, ch.rows
        L = phi[: ch.off_B].reshape(R, q)
        B = phi[ch.off_B : ch.off_b].reshape(N, q)
        pairs = [(l, m) for l in range(q) for m in range(l, q)]
        tables = R * N * N <= TABLE_RATIO * max(weight.size, 1)
        products = self._laplacian_products_tables if tables else self._laplacian_products_cells
        LapB, BB, BBd = products(weight, L, B, pairs)
        LL = np.einsum("il,gim->glm", B, LapB)  # B^T Lap_g B
        LB = LapB.transpose(0, 2, 1)[:, :, :, None] * L[:, None, None, :]  # [g, l', i, l] = L_gl (Lap_g B)_il'
        # assemble: L block, L-B block, B block
        H[: ch.off_B, : ch.off_B].reshape(R, q, R, q)[np.arange(R), :, np.arange(R)] = LL  # a view: block diagonal
        LBm = LB.reshape(R * q, N * q)
        H[: ch.off_B, ch.off_B : ch.off_b] = LBm
        H[ch.off_B : ch.off_b, : ch.off_B] = LBm.T
        HB = H[ch.off_B : ch.off_b, ch.off_B : ch.off_b].reshape(N, q, N, q)  # a view
        for t, (l, m) in enumerate(pairs):
            half = BB[t].reshape(N, N)
            blk = half + half.T
            blk[np.diag_indices(N)] += BBd[t]
            HB[:, l, :, m] = blk
            if m != l:
                HB[:, m, :, l] = blk.T
        return self._add_offsets(H, weight, L, B, offset)

    def _add_offsets(self, H: np.ndarray, weight: np.ndarray, L: np.ndarray, B: np.ndarray,
                     offset: "OffsetWeights | None") -> np.ndarray:
        """Add in place the blocks of the coordinates entering ``eta`` linearly (:attr:`_offsets`), from row and item totals."""
        ch = self.chart
        q, N, R = ch.q, ch.N, ch.rows
        ki, kj = self._row_item_keys
        offs = self._offsets
        n = len(offs)
        D = [np.zeros(R * N) for _ in range(n)]
        per_row = {(u, v): np.zeros(R) for u in range(n) for v in range(u, n)}  # units are functions of the row
        g, item_segments, row_segments = self.cells.g, self._row_item_segments, self._row_segments

        def block(t: int, sl: slice) -> list[tuple[Any, np.ndarray, list[Any]]]:  # per offset: its totals
            parts = []
            for u, (x, _, _, _, _) in enumerate(offs):
                wx = np.multiply(weight[sl], x[sl], out=scratch(sl)[0]) if offset is None else offset[0][u][sl]
                by_row = [self._block_totals(g, row_segments, t, np.multiply(wx, offs[v][0][sl], out=scratch(sl)[1])
                                             if offset is None else offset[1][(u, v)][sl], R) for v in range(u, n)]
                parts.append((self._block_totals(ki, item_segments, t, wx, R * N),
                              np.bincount(kj[sl], weights=wx, minlength=R * N), by_row))
            return parts

        for parts in self._map_blocks(block):
            for u, (items_i, items_j, by_row) in enumerate(parts):
                _add_totals(D[u], items_i)
                D[u] -= items_j
                for v, tot in zip(range(u, n), by_row):
                    _add_totals(per_row[(u, v)], tot)
        Lcols = np.arange(R)[:, None] * q + np.arange(q)
        for u, (_, _, nu, cu, row_unit) in enumerate(offs):
            for v in range(u, n):
                nv = offs[v][2]
                blk = np.bincount(row_unit * nv + offs[v][4], weights=per_row[(u, v)], minlength=nu * nv).reshape(nu, nv)
                H[np.ix_(cu, offs[v][3])] += blk
                if v != u:
                    H[np.ix_(offs[v][3], cu)] += blk.T
            Du = D[u].reshape(R, N)
            bL = Du @ B  # (R, q): the entries (theta_u(g), L_gl), one row g each
            H[cu[row_unit][:, None], Lcols] += bL
            H[Lcols, cu[row_unit][:, None]] += bL
            E = np.zeros((nu, R))
            E[row_unit, np.arange(R)] = 1.0
            for l in range(q):
                MB = E @ (L[:, l][:, None] * Du)  # (units, N)
                Bcols = ch.off_B + np.arange(N) * q + l
                H[np.ix_(cu, Bcols)] += MB
                H[np.ix_(Bcols, cu)] += MB.T
        return H

    def _laplacian_products_tables(self, weight: np.ndarray, L: np.ndarray, B: np.ndarray,
                                   pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Lap_g B``, and per pair ``(l, l')`` ``-sum_g L_gl L_gl' W_g`` and ``sum_g L_gl L_gl' dW_g``, from the tables."""
        N, R, q = B.shape[0], L.shape[0], B.shape[1]
        w = weight if self._pair_order is None else weight[self._pair_order]
        LapB = np.empty((R, N, q))
        BB = np.zeros((len(pairs), N * N))
        BBd = np.zeros((len(pairs), N))
        chunks = self._pair_chunks
        assert chunks is not None  # _outer calls this only for a dense enough design
        for g0, g1, sl in chunks:
            nc = g1 - g0
            W = np.bincount(self._pair_key[sl] - g0 * N * N, weights=w[sl], minlength=nc * N * N).reshape(nc, N, N)
            dW = W.sum(axis=2) + W.sum(axis=1)  # (nc, N)
            LapB[g0:g1] = dW[:, :, None] * B[None] - W @ B - np.matmul(B.T, W).transpose(0, 2, 1)
            coef = np.array([L[g0:g1, l] * L[g0:g1, m] for l, m in pairs])  # (pairs, nc)
            BB -= coef @ W.reshape(nc, N * N)
            BBd += coef @ dW
        return LapB, BB, BBd

    def _laplacian_products_cells(self, weight: np.ndarray, L: np.ndarray, B: np.ndarray,
                                  pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Form :meth:`_laplacian_products_tables` from totals over the cells, without the tables ``W_g``."""
        c = self.cells
        N, R, q = B.shape[0], L.shape[0], B.shape[1]
        ki, kj = self._row_item_keys
        Bc = [np.ascontiguousarray(B[:, l]) for l in range(q)]
        coef = [L[:, l] * L[:, m] for l, m in pairs]
        LapB = np.zeros((q, R * N))
        dW = np.zeros(R * N)
        BB = np.zeros((len(pairs), N * N))
        segments = self._row_item_segments  # the totals by g N + i over its runs (the cells are sorted by it)
        RN = R * N

        def block(t: int, sl: slice) -> list[tuple[tuple[np.ndarray | None, np.ndarray], np.ndarray]]:
            w, i, j, bj = weight[sl], c.i[sl], c.j[sl], kj[sl]
            u, tj = scratch(sl)
            parts = []
            for l in range(q):  # valid indices: mode "clip" skips numpy's bounds check
                np.take(Bc[l], i, out=u, mode="clip")
                u -= np.take(Bc[l], j, out=tj, mode="clip")
                u *= w
                parts.append((self._block_totals(ki, segments, t, u, RN), np.bincount(bj, u, minlength=RN)))
            return [*parts, (self._block_totals(ki, segments, t, w, RN), np.bincount(bj, w, minlength=RN))]

        for parts in self._map_blocks(block):
            for l in range(q):
                _add_totals(LapB[l], parts[l][0])
                LapB[l] -= parts[l][1]
            _add_totals(dW, parts[q][0])
            dW += parts[q][1]
        # the item-pair totals (N^2 of them) in one pass each, the weights in the residuals' work array if it exists
        work = self.__dict__.get("_work")
        u = work[1] if work is not None and weight is not work[1] else np.empty(weight.size)
        bounds = self._row_bounds if self._pair_order is None else None
        for t in range(len(pairs)):
            if bounds is not None:  # rows sorted: coef_t constant on each row's run of cells
                for g in range(R):
                    np.multiply(weight[bounds[g]:bounds[g + 1]], coef[t][g], out=u[bounds[g]:bounds[g + 1]])
            else:
                for sl in self._blocks:
                    np.take(coef[t], c.g[sl], out=u[sl], mode="clip")
                    u[sl] *= weight[sl]
            BB[t] = -np.bincount(self._item_pair_key, u, minlength=N * N)
        dW = dW.reshape(R, N)
        BBd = np.array([ct @ dW for ct in coef]).reshape(len(pairs), N)
        return LapB.reshape(q, R, N).transpose(1, 2, 0), BB, BBd

    def _residual_by_item(self, res: np.ndarray) -> np.ndarray:
        """``R[g, i] = sum_c res_c ([i(c) = i] - [j(c) = i])`` over the cells of loading row ``g``."""
        ch = self.chart
        ki, kj = self._row_item_keys
        out = np.zeros(ch.rows * ch.N)
        segments = self._row_item_segments
        for totals in self._map_blocks(lambda t, sl: self._block_totals(ki, segments, t, res[sl], out.size)):
            _add_totals(out, totals)
        out -= np.bincount(kj, weights=res, minlength=out.size)
        return out.reshape(ch.rows, ch.N)

    def _gradient_factored(self, res: np.ndarray, phi: np.ndarray, agg: np.ndarray) -> np.ndarray:
        """``sum_c res_c d eta_c / d phi`` in the full coordinates, from ``agg`` of :meth:`_residual_by_item`."""
        ch = self.chart
        q = ch.q
        L = phi[: ch.off_B].reshape(ch.rows, q)
        B = phi[ch.off_B : ch.off_b].reshape(ch.N, q)
        g_off = np.zeros(ch.dim_full - ch.off_b)
        g, segments, offs = self.cells.g, self._row_segments, self._offsets

        def block(t: int, sl: slice) -> list[tuple[np.ndarray | None, np.ndarray]]:  # per offset: totals by row
            return [self._block_totals(g, segments, t, np.multiply(res[sl], x[sl], out=scratch(sl)[0]), ch.rows)
                    for x, *_ in offs]

        rows = np.zeros((len(offs), ch.rows))  # totals by loading row, then by unit (a function of the row)
        for parts in self._map_blocks(block):
            for u, totals in enumerate(parts):
                _add_totals(rows[u], totals)
        for u, (_, _, n_units, coord, row_unit) in enumerate(offs):
            g_off[coord - ch.off_b] += np.bincount(row_unit, weights=rows[u], minlength=n_units)
        return np.concatenate([(agg @ B).ravel(), (agg.T @ L).ravel(), g_off])

    def _add_cross(self, H: np.ndarray, agg: np.ndarray) -> None:
        """Add ``sum_c res_c d^2 eta_c / d phi^2`` in place: ``agg[g, i]`` at every ``(L_g,l ; B_i,l)``."""
        ch = self.chart
        q = ch.q
        HLB = H[: ch.off_B, ch.off_B : ch.off_b].reshape(ch.rows, q, ch.N, q)
        HBL = H[ch.off_B : ch.off_b, : ch.off_B].reshape(ch.N, q, ch.rows, q)
        for l in range(q):
            HLB[:, l, :, l] += agg
            HBL[:, l, :, l] += agg.T

    # --------------------------------------------------- per-cell quantities
    def full_jacobian(self, theta: np.ndarray, rows: np.ndarray | None = None) -> sp.csr_matrix:
        """Return ``d eta_c / d phi`` (sparse, ``3(r+1)+1`` entries per cell) of every cell or of the mask ``rows``."""
        if rows is not None:
            # only the selected cells' derivatives and indices are formed
            return Objective(self.chart, self.cells.select(rows), ties=self.family, free=self.free).full_jacobian(theta)
        cols: list[np.ndarray | None] = [*self._columns(self.chart.to_full(theta))]
        m, q = self.cells.g.size, len(cols)
        v = np.empty((m, q))
        for t in range(q):  # filled column by column: no second copy of the columns
            v[:, t] = cols[t]
            cols[t] = None
        itype = np.int32 if max(m * q, self.chart.dim_full) < np.iinfo(np.int32).max else np.int64
        idx = self.__dict__.get("_index")
        idx = self._index_array(itype) if idx is None else idx.astype(itype, copy=False)
        return sp.csr_matrix((v.ravel(), idx.ravel(), np.arange(0, m * q + 1, q, dtype=itype)),
                             shape=(m, self.chart.dim_full))

    def cell_jacobian(self, theta: np.ndarray, rows: np.ndarray | None = None) -> sp.csr_matrix:
        """Return ``d eta_c / d theta`` (sparse ``m x dim``) of every cell or of ``rows``: :meth:`full_jacobian` mapped by ``T``.

        Rows touching the last judge or item are dense in ``theta``: products over many cells stay in ``phi``.
        """
        return (self.full_jacobian(theta, rows) @ self.chart.T_sparse).tocsr()

    def ext_jacobian(self, x: np.ndarray, rows: np.ndarray | None = None) -> sp.csr_matrix:
        """Return the two channels ``[d eta / d (phi, l); d l_{g(c)} / d (phi, l)]`` of the cells (or ``rows``), sparse."""
        J = self.full_jacobian(self.split(x)[0], rows)
        pos = self._lpos if rows is None else self._lpos[rows]
        m, P, nt = J.shape[0], self.chart.dim_full, self.n_tie
        Jl = sp.csr_matrix((np.ones(int((pos >= 0).sum())), (np.flatnonzero(pos >= 0), P + pos[pos >= 0])),
                           shape=(m, P + nt))
        J = sp.hstack([J, sp.csr_matrix((m, nt))], format="csr")
        return sp.vstack([J, Jl], format="csr")

    def probabilities(self, theta: np.ndarray) -> np.ndarray:
        """Fitted probabilities ``sigma(eta_c)`` that item ``i`` wins (binary family; see :meth:`outcome_derivatives`)."""
        self._binary_only("probabilities")
        return expit(self.eta(theta))

    def _binary_only(self, what: str) -> None:
        if not self.family.is_binary:
            raise ArgumentError(f"{what} is for the binary family: tie cells have three outcomes "
                                "(use outcome_derivatives(x) and ext_jacobian(x))")

    def cell_scores(self, theta: np.ndarray) -> sp.csr_matrix:
        """Return the per-cell scores ``w_c (n_c p_c - y_c) d eta_c / d theta`` (binary family; they sum to the gradient)."""
        c = self.cells
        self._binary_only("cell_scores")
        p = self.probabilities(theta)
        return (sp.diags(c.w * (c.n * p - c.y)) @ self.cell_jacobian(theta)).tocsr()

