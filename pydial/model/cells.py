r"""The cells of the bilinear likelihood: stacked tables, their factored Jacobian, tie groups, totals and losses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from pydial.cache import derived
from pydial.data.comparisons import CellTable, Comparisons, HumanCells, LLMCells
from pydial.exceptions import ArgumentError
from pydial.model.chart import Chart
from pydial.model.families import Family, binary_cell, softplus

__all__ = ["Cells", "CellJacobian", "binomial_nll", "covariate_offset", "family_totals", "free_groups", "human_counts",
           "human_loss", "human_loss_at", "human_log_nu", "human_table", "key_segments", "llm_loss", "softplus",
           "stacked_columns", "tie_groups", "tie_human_loss", "tie_totals", "weighted_loss"]


def binary_counts(n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(m, 3)`` outcome counts ``(y, n - y, 0)`` of binary cells (``n`` decisive judgments, ``y`` wins of ``i``)."""
    n, y = np.asarray(n, float), np.asarray(y, float)
    return np.column_stack([y, n - y, np.zeros_like(y)])


def binomial_nll(eta: np.ndarray, n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-cell binomial negative log-likelihood ``n log(1 + e^eta) - y eta`` (without the coefficient)."""
    return n * softplus(eta) - y * eta


def covariate_offset(cells: CellTable, beta: np.ndarray | None) -> np.ndarray | float:
    """Return ``z_c' beta`` for one row of coefficients ``beta`` (a judge's or ``beta_H``; 0 without covariates)."""
    return 0.0 if beta is None or cells.z is None else cells.z @ np.ravel(beta)


def stacked_columns(parts: Sequence[tuple[CellTable, float, bool]], *, counts: bool = False) -> dict[str, Any]:
    """Columns of :class:`Cells` for the tables ``(table, weight, is_human)`` of positive weight, stacked in order.

    With ``counts=True`` also the ``(m, 3)`` outcome counts (as floats).
    """
    kept = [(tab, w, h) for tab, w, h in parts if w > 0 and len(tab)]
    if not kept:
        raise ArgumentError("no cells with positive weight")
    out = {name: np.concatenate([np.asarray(getattr(tab, f)) for tab, _, _ in kept], dtype=dtype)
           for name, f, dtype in (("g", "judge", np.int64), ("i", "i", np.int64), ("j", "j", np.int64),
                                  ("a", "a", np.int64), ("n", "n", float), ("y", "y", float))}
    out["w"] = np.concatenate([np.full(len(tab), float(w)) for tab, w, _ in kept])
    if any(tab.z is not None for tab, _, _ in kept):
        out["z"] = np.concatenate([np.asarray(tab.z, float) for tab, _, _ in kept])
    out["is_human"] = np.concatenate([np.full(len(tab), h) for tab, _, h in kept])
    if counts:
        out["outcome_counts"] = np.concatenate([tab.counts for tab, _, _ in kept], dtype=float)
    return out


@dataclass(frozen=True)
class Cells:
    """Cell tables (:class:`pydial.data.comparisons.CellTable`) stacked for the bilinear kernel, with weights.

    ``g`` is the loading row (judge ``k``, ``K`` for the people, whose ``a`` is 0); ``w`` the per-comparison weight.
    """

    g: np.ndarray
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    n: np.ndarray
    y: np.ndarray
    w: np.ndarray
    is_human: np.ndarray
    outcome_counts: np.ndarray | None = None
    """``(m, 3)`` outcome counts (wins of ``i``, wins of ``j``, ties) of the tie cells, ``None`` for
    the binary cells; with them ``n`` is the cell total (ties included) and ``y`` the wins of ``i``."""
    z: np.ndarray | None = None
    """``(m, p)`` comparison covariates of the cells (:attr:`pydial.data.comparisons.CellTable.z`), ``None`` without."""
    layout: dict = field(default_factory=dict, kw_only=True, repr=False, compare=False)
    """Arrays an :class:`Objective` derives from the index columns ``g, i, j, a, is_human`` alone;
    shared by the cells that differ from these only in ``n``, ``y`` or ``w`` (the same stack at
    another weight, :func:`dataclasses.replace`)."""
    source: "tuple[Cells, slice] | None" = field(default=None, kw_only=True, repr=False, compare=False)
    """The stack these cells are a slice of (:meth:`select`): their per-cell layout arrays are views of its."""

    @classmethod
    def from_tables(cls, parts: Sequence[tuple[CellTable, float, bool]], *, with_ties: bool = False) -> "Cells":
        """Stack the tables ``(table, weight, is_human)`` of positive weight, in order (``with_ties``: with outcome counts)."""
        return cls(**stacked_columns(parts, counts=with_ties))

    @classmethod
    def stack(cls, data: Comparisons, w_llm: float, w_human: float, *, with_ties: bool = False) -> "Cells":
        r"""Stack the LLM cells (if ``w_llm > 0``), then the human cells (if ``w_human > 0``) on loading row ``K``.

        ``w_llm = lambda/n_L``, ``w_human = 1/n_H``: the cells of :math:`Q_\lambda` (eq. weighted-loss).  The decisive
        stack is cached on ``data`` and its slices and reweightings share its columns and :attr:`layout`;
        ``with_ties``: the tie cells, in the order of :meth:`Comparisons.tie_cells` (the Stan data's).
        """
        if with_ties:
            return cls.from_tables([(data.cell_table("llm", with_ties=True), w_llm, False),
                                    (data.cell_table("human", with_ties=True), w_human, True)], with_ties=True)
        if not (w_llm > 0 and len(data.llm)) and not (w_human > 0 and len(data.human)):
            raise ArgumentError("no cells with positive weight")
        full = derived(data, ("stacked cells", True, True), lambda: cls.from_tables(
            [(data.llm, 1.0, False), (data.human.with_judge(data.K), 1.0, True)]))
        m = len(data.llm)
        base = full if (w_llm > 0 and w_human > 0) else derived(
            data, ("stacked cells", w_llm > 0, w_human > 0), lambda: full.select(slice(0, m) if w_llm > 0 else slice(m, None)))
        return dataclasses.replace(base, w=np.where(base.is_human, float(w_human), float(w_llm)))

    @property
    def counts(self) -> np.ndarray:
        """``(m, 3)`` outcome counts: :attr:`outcome_counts`, or ``(y, n - y, 0)`` for binary cells."""
        return binary_counts(self.n, self.y) if self.outcome_counts is None else self.outcome_counts

    def select(self, rows: "np.ndarray | slice") -> "Cells":
        """Return the cells selected by ``rows``; a slice of a stack shares its columns and per-cell layout arrays as views."""
        cols = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("layout", "source")}
        picked: dict[str, Any] = {name: None if v is None else v[rows] for name, v in cols.items()}
        shared = rows if isinstance(rows, slice) and self.source is None and rows.step in (None, 1) else None
        return type(self)(**picked, source=None if shared is None else (self, shared))


def key_segments(key: np.ndarray, blocks: list[slice]) -> "list[tuple[np.ndarray, np.ndarray]] | None":
    """Find the runs ``(value, start)`` of a non-decreasing ``key`` in each block (``None`` if unsorted).

    Totals over runs (``numpy.add.reduceat``) are several times faster than ``bincount``'s scattered adds.
    """
    if key.size > 1 and bool(np.any(key[1:] < key[:-1])):
        return None
    out = []
    for sl in blocks:
        k = key[sl]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else np.zeros(0, np.int64)
        out.append((k[starts], starts))
    return out


@dataclass(frozen=True, eq=False)
class CellJacobian:
    r"""``J = d eta_c / d phi`` of an :class:`Objective`'s cells at ``theta`` (or of ``mask``), kept factored.

    The meats' products are formed as the Hessian is, from per-(judge, item) and item-pair totals;
    the ``m x P`` matrix only when asked (:meth:`tocsr`).
    """

    objective: Any
    """The :class:`~pydial.model.likelihood.Objective` of the cells."""
    theta: np.ndarray
    mask: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, dim_full)``."""
        m = self.objective.cells.g.size if self.mask is None else int(np.count_nonzero(self.mask))
        return m, self.objective.chart.dim_full

    @cached_property
    def _phi(self) -> np.ndarray:
        return self.objective.chart.to_full(self.theta)

    def _per_cell(self, x: np.ndarray) -> np.ndarray:
        """Values on the rows spread over all cells of the objective (0 off ``mask``)."""
        if self.mask is None:
            return np.asarray(x, float)
        out = np.zeros(self.mask.size)
        out[self.mask] = x
        return out

    def gram(self, d: np.ndarray) -> np.ndarray:
        """``J^T diag(d) J`` (dense ``P x P``)."""
        return self.objective._outer(self._per_cell(d), None, self._phi)

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """``J^T r``."""
        r = self._per_cell(r)
        return self.objective._gradient_factored(r, self._phi, self.objective._residual_by_item(r))

    def cluster_gram(self, cluster: np.ndarray, r: np.ndarray) -> np.ndarray:
        """``sum_k g_k g_k^T``, ``g_k = sum_{c in k} r_c j_c``, over the clusters ``cluster`` (eq. cell-clustered-meat).

        A cluster's cells share row and item pair, so ``g_k = S_k j_k + sum_u X_uk e_u`` (the offsets of
        :attr:`Objective._offsets`): :meth:`Objective._outer` with weights on one representative cell per cluster.
        """
        o = self.objective
        m = o.cells.g.size
        rows = np.arange(m) if self.mask is None else np.flatnonzero(self.mask)
        G = int(cluster.max()) + 1 if cluster.size else 0
        S = np.bincount(cluster, weights=r, minlength=G)
        X = [np.bincount(cluster, weights=r * (x if self.mask is None else x[rows]), minlength=G) for x, *_ in o._offsets]
        rep = np.empty(G, np.int64)
        rep[cluster] = rows  # any cell of a cluster represents it; the others get weight 0
        w = np.bincount(rep, S * S, m)
        wx = [np.bincount(rep, S * Xu, m) for Xu in X]
        wxx = {(u, v): np.bincount(rep, X[u] * X[v], m) for u in range(len(X)) for v in range(u, len(X))}
        del S, X, rep  # the per-cluster totals are not needed by the sums over the cells
        return o._outer(w, None, self._phi, offset=(wx, wxx))

    def rows(self, mask: np.ndarray) -> "CellJacobian | sp.csr_matrix":
        """Return the rows selected by ``mask``: sparse when they are at most half of them, factored otherwise."""
        sel = mask if self.mask is None else self._per_cell(mask).astype(bool)
        if 2 * np.count_nonzero(sel) <= sel.size:
            return self.objective.full_jacobian(self.theta, rows=sel)
        return CellJacobian(self.objective, self.theta, sel)

    def tocsr(self) -> sp.csr_matrix:
        """``J`` as a sparse matrix (:meth:`Objective.full_jacobian`)."""
        return self.objective.full_jacobian(self.theta, rows=self.mask)


def human_table(data: Comparisons, family: Family) -> CellTable:
    """Return the people's cells of ``family``: :attr:`~pydial.Comparisons.human` as given (binary), else the tie cells."""
    return data.human if family.is_binary else data.cell_table("human", with_ties=True)


def human_counts(data: Comparisons, family: Family) -> np.ndarray:
    """Return the ``(m, 3)`` outcome counts of :func:`human_table` as floats (the binary family's as given, ``(y, n - y, 0)``)."""
    H = human_table(data, family)
    return binary_counts(H.n, H.y) if family.is_binary else H.counts.astype(float)


def tie_totals(data: Comparisons) -> tuple[int, int]:
    """``(n_L, n_H)`` counting the ties: the LLM and human comparisons used by the tie models."""
    return int(data.cell_table("llm", with_ties=True).n.sum()), int(data.cell_table("human", with_ties=True).n.sum())


def family_totals(data: Comparisons, family: Family) -> tuple[int, int]:
    """``(n_L, n_H)`` of eq. weighted-loss in the family: the decisive comparisons (binary family), else counting the ties."""
    return (data.n_llm, data.n_human) if family.is_binary else tie_totals(data)


def free_groups(data: Comparisons, chart: Chart, family: Family) -> np.ndarray:
    """Return the loading rows with a free tie parameter in ``family`` (none if binary; :func:`tie_groups`)."""
    return np.zeros(0, np.int64) if family.is_binary else tie_groups(data, chart)


def tie_groups(data: Comparisons, chart: Chart) -> np.ndarray:
    """Find the loading rows with at least one tie: the groups whose ``log nu`` is free (the people when calibrated).

    A group without ties has the boundary MLE ``nu = 0`` for both tie models, at which its cells are binary.
    """
    tabs = [data.cell_table(which, with_ties=True) for which in ("llm", "human")]
    tied = np.unique(np.concatenate([t.judge[t.counts[:, 2] > 0] for t in tabs]))
    return tied[tied < chart.rows]


def human_loss(s: np.ndarray, human: HumanCells, beta: np.ndarray | None = None) -> float:
    r"""Compute the normalized human loss :math:`\ell_H(s)` (eq. human-full-loss), with ``z' beta_H`` when given."""
    eta = s[human.i] - s[human.j] + covariate_offset(human, beta)
    return float(binomial_nll(eta, human.n, human.y).sum()) / float(human.n.sum())


def llm_loss(S: np.ndarray, b: np.ndarray, llm: LLMCells) -> float:
    r"""Compute the normalized LLM loss :math:`\ell_L(S, b)` (eq. llm-negloglik)."""
    eta = S[llm.judge, llm.i] - S[llm.judge, llm.j] + llm.a * b[llm.judge]
    return float(binomial_nll(eta, llm.n, llm.y).sum()) / float(llm.n.sum())


def weighted_loss(s: np.ndarray, S: np.ndarray, b: np.ndarray, data: Comparisons, lambda_: float) -> float:
    r""":math:`Q_\lambda(s, S, b) = \ell_H(s) + \lambda \ell_L(S, b)` (eq. weighted-loss)."""
    return human_loss(s, data.human) + lambda_ * llm_loss(S, b, data.llm)


def tie_human_loss(family: Family, s: np.ndarray, log_nu_h: float, data: Comparisons,
                   beta: np.ndarray | None = None) -> float:
    r"""Compute the human loss :math:`\ell_H(s, \nu_H)` of ``family`` (over ``n_H``, ties counted), with ``z' beta_H``.

    ``log_nu_h = -inf``: the binary model (people without ties); the binary family: :func:`human_loss`.
    """
    if family.is_binary:
        return human_loss(s, data.human, beta)
    h = data.cell_table("human", with_ties=True)
    cnt = h.counts.astype(float)
    eta = s[h.i] - s[h.j] + covariate_offset(h, beta)
    d = binary_cell(cnt, eta) if np.isneginf(log_nu_h) else family.cell(cnt, eta, log_nu_h)
    return -float(d.value.sum()) / float(cnt.sum())


def human_log_nu(ch: Chart, free: np.ndarray, x: np.ndarray) -> float:
    """Return ``log nu_H`` of ``x = (theta, log nu)`` with the free tie groups ``free`` (``-inf`` when not free)."""
    return float(x[ch.dim + int(np.flatnonzero(free == ch.K)[0])]) if ch.K in free else -np.inf


def human_loss_at(data: Comparisons, family: Family, ch: Chart, x: np.ndarray, free: np.ndarray) -> float:
    r"""Return :math:`\ell_H` (eq. human-full-loss) of ``family`` at the calibrated fit ``x = (theta, log nu)`` of ``ch``."""
    th = x[: ch.dim]
    return tie_human_loss(family, ch.scores(th), human_log_nu(ch, free, x), data, ch.human_effects(th))
