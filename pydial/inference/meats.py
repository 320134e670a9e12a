r"""Sandwich meats of DIAL estimators from per-comparison influence contributions.

Every estimator here is a (possibly two-stage) M-estimator, so a smooth target
``t`` (the scores ``s``, the order effects ``b``, ...) is linearized as

.. math:: \hat t - t \approx \sum_v \mathrm{IF}_v ,\qquad
          \mathrm{IF}_v = w_v\{(p_{c(v)} - z_v)\, u_{c(v)} - \bar u_{\mathrm{block}(v)}\}

where ``v`` runs over single comparisons, ``c(v)`` is its cell, ``w_v`` the
per-comparison weight of the criterion, ``u_c = A \nabla\eta_c`` the cell's
influence direction and ``\bar u`` the within-block mean score (the human and
LLM blocks are centered separately, eq. weighted-empirical-sandwich).  For a
single-stage fit ``A = \dot t H^+`` (the sandwich of eq. weighted-empirical-sandwich
with Moore-Penrose inverse in the over-parameterized chart, Lemma
overparam-invariance); for the staged endpoint ``lambda = inf`` the LLM cells use
``A = (d t/d xi)_{total} H_\xi^+`` and the human cells ``A = (d t/ d c) C^{-1}``, the
two-step (stacked estimating equation) delta method, which is the
``lambda -> inf`` limit of the finite-lambda sandwich at the observed ``n_H/n_L``.

The covariance is ``sum over clusters of (sum_{v in cluster} IF_v)(...)^T`` with

* ``"fisher"``   -- model-based: ``sum_c w_c^2 n_c p_c (1-p_c) u_c u_c^T`` (no centering);
* ``"binomial"`` -- every comparison its own cluster (identity kernel of eq. hac-meat);
* ``"cell"``     -- LLM comparisons clustered by (judge, pair) over both orders
  (eq. cell-clustered-meat), human comparisons independent;
* ``"record"``   -- all comparisons of a record (human and LLM) clustered together
  (eq. hac-meat with the record kernel).

A fit keeps its :class:`Linearization` (the factored influence of its targets and the
cells behind it), so the covariance of any meat is formed later without refitting
(:meth:`pydial.estimation.results.DialResult.with_cov`).  The clustered meats can be scaled by
the small-sample factor ``G/(G-1)`` (``G`` clusters; off by default), the correction of
statsmodels' ``cov_type="cluster"`` without its ``(n-1)/(n-k)`` regression factor.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, cast, runtime_checkable

import numpy as np
import scipy.sparse as sp

from pydial.data.comparisons import Comparisons
from pydial.exceptions import ArgumentError, CovarianceWarning

COV_TYPES: tuple[str, ...] = ("fisher", "binomial", "cell", "record")
COV_DESCRIPTIONS = {
    "fisher": "model-based (Fisher information)",
    "binomial": "sandwich, independent comparisons (binomial meat)",
    "cell": "sandwich, clustered by judge-pair cell",
    "record": "sandwich, clustered by record (HAC meat with a record kernel)",
}
ANCHORED_COVS: tuple[str, ...] = ("two-step", "fixed-basis")
"""Covariances at the anchored endpoint ``lambda = inf`` (:func:`pydial.fit`'s ``anchored_cov``)."""
CLUSTERED: tuple[str, ...] = ("cell", "record")
"""The meats the small-sample factor ``G/(G-1)`` applies to."""


def check_cov_type(cov_type: str) -> str:
    """Validate a meat name against :data:`COV_TYPES`."""
    if cov_type not in COV_TYPES:
        raise ArgumentError(f"cov_type must be one of {COV_TYPES}, got {cov_type!r}")
    return cov_type


@dataclass(frozen=True)
class CellStats:
    r"""Counts and fitted statistics of the cells in the stacked order of :class:`pydial.model.cells.Cells`.

    The LLM cells come first, then the human cells; ``w`` is each cell's per-comparison weight,
    ``is_human`` its block, ``n`` its comparisons (ties included).  A comparison ``v`` with outcome
    ``o`` in cell ``c`` has the loss score ``-(a_{co} \nabla\eta_c + b_{co} \nabla l_{g(c)})`` on the
    derivative channels of the Jacobian (:func:`parameter_meat`), in one of two forms:

    * binary cells (one channel ``eta``; :meth:`from_parts`): ``y`` the wins of ``i`` and ``p`` the
      fitted ``P(i wins)``, the score ``p - z`` and the cell sums ``n p - y`` (the binary family's
      fast path);
    * outcome cells (two channels ``eta``, ``l``; :meth:`outcomes`): ``counts``, ``P``, ``a``, ``b``
      ``(m, 3)``, the counts, probabilities and derivatives ``a = d log P / d eta``,
      ``b = d log P / d l`` of each outcome (``i`` wins, ``j`` wins, tie;
      :meth:`pydial.model.likelihood.Objective.outcome_derivatives`); ``information``
      (optional, ``(m, 3)``) each cell's observed information ``-(d^2/d eta^2, d^2/d eta d l,
      d^2/d l^2)``, when given the ``"fisher"`` meat is the observed rather than the expected one.
      Their record rows are given to :func:`parameter_meat` (:class:`MeatSource`).

    ``llm_index`` / ``human_index`` give each cell's position in ``data.llm`` /
    ``data.human`` (``-1`` where not applicable), used for clustering; ``None`` (both) when
    the LLM cells are ``data.llm`` in order and the human cells ``data.human`` in order.
    ``pair_key``, when given, is each cell's judge-pair key instead (:meth:`pair_keys`).
    """

    n: np.ndarray
    w: np.ndarray
    is_human: np.ndarray
    y: np.ndarray | None = None
    p: np.ndarray | None = None
    counts: np.ndarray | None = None
    P: np.ndarray | None = None
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    information: np.ndarray | None = None
    llm_index: np.ndarray | None = None
    human_index: np.ndarray | None = None
    pair_key: np.ndarray | None = None

    @classmethod
    def from_parts(cls, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, float, bool]]) -> "CellStats":
        """Binary cells from ``(n, y, p, w, is_human)`` groups.

        The LLM groups cover ``data.llm`` in order, the human ones ``data.human``.

        One group is kept as it is (no copy of its arrays).
        """
        def stack(col: list[np.ndarray]) -> np.ndarray:
            return col[0] if len(col) == 1 else np.concatenate(col)

        n, y, p = (stack([np.asarray(x[t]) for x in parts]) for t in range(3))
        w = stack([np.full(x[0].size, x[3], float) for x in parts])
        h = stack([np.full(x[0].size, x[4]) for x in parts])
        return cls(n, w, h, y, p)

    @classmethod
    def outcomes(cls, counts: np.ndarray, P: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray,
                 is_human: np.ndarray, pair_key: np.ndarray, information: np.ndarray | None = None) -> "CellStats":
        """Outcome cells (``i`` wins, ``j`` wins, tie) on the two channels ``eta`` and ``l``."""
        return cls(np.asarray(counts, float).sum(1), w, is_human, counts=counts, P=P, a=a, b=b,
                   information=information, pair_key=pair_key)

    @property
    def binary(self) -> bool:
        """Whether these are binary cells on the one channel ``eta`` (the ``n p - y`` fast path)."""
        return self.a is None

    def _yp(self) -> tuple[np.ndarray, np.ndarray]:
        """``(y, p)`` of binary cells."""
        return cast(np.ndarray, self.y), cast(np.ndarray, self.p)

    def _outcome_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(counts, P, a, b)`` of outcome cells."""
        return cast(np.ndarray, self.counts), cast(np.ndarray, self.P), cast(np.ndarray, self.a), cast(np.ndarray, self.b)

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions in ``data.llm`` of the LLM cells and in ``data.human`` of the human cells, in cell order."""
        h = self.is_human
        if self.llm_index is None or self.human_index is None:
            return np.arange(int(np.count_nonzero(~h))), np.arange(int(np.count_nonzero(h)))
        return self.llm_index[~h], self.human_index[h]

    def outcome_scores(self) -> np.ndarray:
        """Loss score of one comparison per channel, cell and outcome: ``(1, m, 2)`` ``p - z`` or ``(2, m, 3)`` ``-(a, b)``."""
        if self.binary:
            p = self._yp()[1]
            return np.column_stack([p - 1, p])[None]
        return -np.stack(self._outcome_arrays()[2:])

    def fisher(self) -> np.ndarray:
        """Each cell's information in the channels, ``(C, C, m)``: ``n p (1 - p)``, or observed when given, else expected."""
        if self.binary:
            p = self._yp()[1]
            return (self.n * p * (1 - p))[None, None]
        if self.information is not None:
            ee, el, ll = self.information.T
            return np.array([[ee, el], [el, ll]])
        counts, P = self._outcome_arrays()[:2]
        S = self.outcome_scores()
        return counts.sum(1) * np.einsum("mo,kmo,lmo->klm", P, S, S)

    def totals(self) -> np.ndarray:
        """Comparisons per cell, ``(m,)``."""
        return self.n

    def score_sums(self) -> np.ndarray:
        """Sum of the cell's comparisons' scores per channel, ``(C, m)``: ``n p - y`` for binary cells."""
        if self.binary:
            y, p = self._yp()
            return (self.n * p - y)[None]
        return np.einsum("mo,kmo->km", np.asarray(self._outcome_arrays()[0], float), self.outcome_scores())

    def score_square_sums(self, mask: np.ndarray) -> np.ndarray:
        """Sum over the comparisons of the cells ``mask`` of the channels' score products, ``(C, C, m')``.

        Binary cells: ``y (p - 1)^2 + (n - y) p^2``.
        """
        if self.binary:
            y, p = (x[mask] for x in self._yp())
            n = self.n[mask]
            return (y * (p - 1) ** 2 + (n - y) * p**2)[None, None]
        S = self.outcome_scores()[:, mask]
        return np.einsum("mo,kmo,lmo->klm", np.asarray(self._outcome_arrays()[0], float)[mask], S, S)

    def pair_keys(self, data: Comparisons) -> np.ndarray:
        """Judge-pair key of every LLM cell (the clusters of the cell meat; ``-1`` for human cells)."""
        if self.pair_key is not None:
            return self.pair_key
        L, li, key = data.llm, self.positions()[0], np.full(self.n.size, -1, np.int64)
        key[~self.is_human] = (L.judge[li] * data.N + L.i[li]) * data.N + L.j[li]
        return key

    def record_rows(self, data: Comparisons) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(record, cell, outcome)`` of every decisive judgment of ``data.rows`` in binary cells.

        None without records, and for outcome cells (whose rows are given to :func:`parameter_meat`).
        """
        R = data.rows
        if R is None or not self.binary:
            return None
        h = self.is_human
        pos_llm, pos_h = np.full(len(data.llm), -1), np.full(len(data.human), -1)
        li, hi = self.positions()
        pos_llm[li] = np.flatnonzero(~h)
        pos_h[hi] = np.flatnonzero(h)
        is_h_row = R.judge == data.K
        pos = np.full(R.cell.size, -1)
        pos[is_h_row] = pos_h[R.cell[is_h_row]]
        pos[~is_h_row] = pos_llm[R.cell[~is_h_row]]
        used = pos >= 0
        return R.record[used], pos[used], np.where(R.z[used] == 1, 0, 1)


@runtime_checkable
class FactoredJacobian(Protocol):
    """A cell Jacobian ``J`` (m x P) that forms the meats' products without the ``m x P`` matrix.

    :class:`pydial.model.cells.CellJacobian` is the one of the structured fits.
    """

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, P)``."""

    def gram(self, d: np.ndarray) -> np.ndarray:
        """``J^T diag(d) J``."""

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """``J^T r``."""

    def cluster_gram(self, cluster: np.ndarray, r: np.ndarray) -> np.ndarray:
        """``sum_k g_k g_k^T``, ``g_k = sum_{c in k} r_c j_c`` over judge-pair clusters ``k``."""

    def rows(self, mask: np.ndarray) -> Any:
        """Return the rows selected by the boolean ``mask`` (factored or sparse)."""

    def tocsr(self) -> sp.csr_matrix:
        """``J`` as a sparse matrix."""


@dataclass(frozen=True)
class Influence:
    r"""Influence directions in factored form, ``u_c = A j_c`` (``U = J A^T``).

    ``J`` (m x P, usually sparse) holds the derivatives ``d eta_c / d zeta`` of every
    cell's linear predictor in some parameter space (each LLM cell touches
    ``3(r+1)+1`` coordinates, each human cell ``2(r+1)+d``) and ``A`` (q x P, dense)
    maps a parameter score to the target (``A = \dot t H^+`` for a one-stage fit,
    the two-step maps of the staged endpoint stacked side by side).  The meats are
    formed in the parameter space as sparse products and only ``P x P`` and
    ``q x q`` matrices are ever dense.
    """

    J: Any
    A: np.ndarray

    def dense(self) -> np.ndarray:
        """``U = J A^T`` (m x q); for checks on small problems only."""
        return np.asarray(as_sparse(self.J) @ self.A.T)


def stack_influence(parts: "list[Influence]") -> "Influence":
    """Influence of cells stacked block by block (e.g. LLM then human cells).

    Each block has its own parameter space: ``J`` block-diagonal (a :class:`BlockJacobian`
    when a block is factored), ``A`` side by side.
    """
    A = np.hstack([p.A for p in parts])
    if any(isinstance(p.J, FactoredJacobian) for p in parts):
        return Influence(BlockJacobian(tuple(p.J for p in parts)), A)
    return Influence(sp.block_diag([sp.csr_matrix(p.J) for p in parts], format="csr"), A)


@dataclass(frozen=True, eq=False)
class BlockJacobian:
    """Cell Jacobians stacked block-diagonally: the rows of each block, then the next, each on its own columns.

    The blocks are sparse matrices or :class:`FactoredJacobian` s; the products of the
    meats are formed block by block (a :class:`FactoredJacobian` itself).
    """

    blocks: tuple[Any, ...]

    @property
    def shape(self) -> tuple[int, int]:
        """``(sum of the rows, sum of the columns)``."""
        return sum(b.shape[0] for b in self.blocks), sum(b.shape[1] for b in self.blocks)

    def _split(self, x: np.ndarray) -> list[np.ndarray]:
        """Cut a per-row array into the blocks' rows."""
        return np.split(np.asarray(x), np.cumsum([b.shape[0] for b in self.blocks])[:-1])

    def gram(self, d: np.ndarray) -> sp.csr_matrix:
        """``J^T diag(d) J``: the blocks' Gram matrices on the diagonal."""
        return sp.block_diag([sp.csr_matrix(_gram(b, x)) if b.shape[0] else sp.csr_matrix((b.shape[1], b.shape[1]))
                              for b, x in zip(self.blocks, self._split(d))], format="csr")

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """``J^T r``, block by block."""
        return np.concatenate([_rmatvec(b, x) if b.shape[0] else np.zeros(b.shape[1])
                               for b, x in zip(self.blocks, self._split(r))])

    def cluster_gram(self, cluster: np.ndarray, r: np.ndarray) -> sp.csr_matrix:
        """:meth:`FactoredJacobian.cluster_gram`, on the rows of one block (clusters do not span blocks)."""
        full = [k for k, b in enumerate(self.blocks) if b.shape[0]]
        if len(full) != 1:
            raise ArgumentError("clustered rows of a block Jacobian must lie in one block")
        (k,) = full
        b = self.blocks[k]
        if isinstance(b, FactoredJacobian):
            G = b.cluster_gram(cluster, r)
        else:
            Gs = sp.csr_matrix(_indicator(cluster, int(cluster.max()) + 1) @ _scale_rows(b, r))
            G = Gs.T @ Gs
        return sp.block_diag([sp.csr_matrix(G) if t == k else sp.csr_matrix((x.shape[1], x.shape[1]))
                              for t, x in enumerate(self.blocks)], format="csr")

    def rows(self, mask: np.ndarray) -> "BlockJacobian":
        """Return the rows selected by ``mask`` (every block keeps its columns)."""
        return BlockJacobian(tuple(sp.csr_matrix((0, b.shape[1])) if not m.any() else _rows(b, m)
                                   for b, m in zip(self.blocks, self._split(mask))))

    def tocsr(self) -> sp.csr_matrix:
        """``J`` as a sparse matrix."""
        return sp.block_diag([sp.csr_matrix(as_sparse(b)) for b in self.blocks], format="csr")


def influence_covariance(U: "Influence | np.ndarray", st: CellStats, data: Comparisons, cov_type: str, *,
                         what: str = "the estimates") -> np.ndarray:
    """Covariance ``sum_clusters (sum IF)(sum IF)^T`` of a linearized target.

    Eq. weighted-empirical-sandwich; clustered meats as eq. hac-meat.

    Parameters
    ----------
    U : Influence or ndarray (m, q)
        Influence directions ``u_c`` of every cell (stacked order of ``st``), either
        factored (``J``, ``A``) or as a dense matrix (taken as ``J`` with ``A = I``).
    st : CellStats
        Counts, fitted probabilities and weights of the same cells.
    data : Comparisons
        Supplies the judge-pair and record structure for clustering.
    cov_type : {"fisher", "binomial", "cell", "record"}
    what : str
        Name of the target, for the warning of :func:`degenerate_meat`.

    Returns
    -------
    ndarray (q, q)
        All NaN when the sandwich meat is degenerate (see :func:`degenerate_meat`).
    """
    check_cov_type(cov_type)
    if isinstance(U, Influence):
        return Linearization(MeatSource(U.J, st), U.A, {}, what).covariance(data, cov_type)
    J = U
    return meat_covariance(parameter_meat(J, st, data, cov_type), lambda: _gram(J, np.ones(J.shape[0])), None, cov_type, what)


def meat_covariance(M: "Meat", JtJ: Callable[[], Any], A: np.ndarray | None, cov_type: str, what: str,
                    correction: bool = False) -> np.ndarray:
    """Return the sandwich ``A M A^T`` of eq. weighted-empirical-sandwich (``M`` itself when ``A`` is None).

    All NaN when the meat is degenerate for the target's ``rank(J A^T)`` directions
    (``JtJ()`` returns ``J^T J``; :func:`degenerate_meat`).  ``correction``: scale a clustered meat
    (:data:`CLUSTERED`) by ``G/(G-1)``, ``G`` its number of clusters.
    """
    C = M.dense() if A is None else M.sandwich(A)
    # the model-based meat is never degenerate, nor one with more clusters than the target has
    # directions (at most the rows of A): no Gram matrix needed then
    if M.clusters is not None and M.clusters <= (C.shape[0] if A is None else min(A.shape)):
        G = JtJ()
        gram = _dense(G) if A is None else np.asarray(A @ _dense(G @ A.T))
        if degenerate_meat(gram, M.clusters, cov_type, what):
            return np.full_like(C, np.nan)
    if correction and cov_type in CLUSTERED and M.clusters is not None:
        C = C * (M.clusters / (M.clusters - 1.0))
    return C


@dataclass(eq=False)
class MeatSource:
    """The cells behind a covariance: the Jacobian ``J`` of their linear predictors and their statistics.

    ``stats`` is a :class:`CellStats` of binary cells or of outcome cells (cells with
    ties, with ``record_rows`` for the record meat; ``J`` then holds the two derivative
    channels), the meats those of :func:`parameter_meat`.  The meat of each type
    is computed once per data set and kept, so several targets (e.g. ``b`` and ``gamma``
    of the same LLM-only fit) and later :meth:`pydial.estimation.results.DialResult.with_cov` calls
    share it.  The meats are those of eq. weighted-empirical-sandwich, eq.
    cell-clustered-meat and eq. hac-meat.
    """

    J: Any
    stats: "CellStats"
    record_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    _meats: dict[tuple[str, int], "Meat"] = field(default_factory=dict, init=False, repr=False)
    _jtj: Any = field(default=None, init=False, repr=False)

    def meat(self, data: Comparisons, cov_type: str) -> "Meat":
        """Return the meat of type ``cov_type`` in the parameter space of ``J`` (clusters from ``data``)."""
        check_cov_type(cov_type)
        key = (cov_type, id(data))  # the cells' data supply the judge-pair and record clusters
        if key not in self._meats:
            self._meats[key] = parameter_meat(self.J, self.stats, data, cov_type, self.record_rows)
        return self._meats[key]

    def gram(self) -> Any:
        """``J^T J``, for the degeneracy check of :func:`meat_covariance`."""
        if self._jtj is None:
            self._jtj = _gram(self.J, np.ones(self.J.shape[0]))
        return self._jtj


@dataclass(frozen=True, eq=False)
class Linearization:
    """The influence of a group of targets on the cells of a fit, factored as ``u_c = A j_c``.

    A fit keeps these so that the covariance ``A M A^T`` of any meat ``M`` (eq.
    weighted-empirical-sandwich, eq. cell-clustered-meat, eq. hac-meat) is formed on
    demand without refitting.

    Attributes
    ----------
    source : MeatSource
        The cells and their Jacobian (shared by the targets of one fit).
    A : ndarray (q, P)
        Maps a parameter score to the targets.
    blocks : mapping of str to slice
        Which rows of ``A`` are which target (``"scores"``, ``"b"``, ``"gamma"``,
        ``"log_nu"`` ...); the covariance is formed jointly and split by these.
    what : str
        The targets' name, for warnings.
    stage_one : slice or None
        The columns of ``A`` that carry the estimation error of the LLM stage of a
        two-step influence (the staged endpoint ``lambda = inf``); ``anchored_cov_type=
        "fixed-basis"`` drops them (the ``M H_M^{-1} M^T`` limit of Cor. uniform-lambda).
    tie_labels : tuple of str
        The rows (judge labels) of the result's ``tie_parameters`` that the block
        ``"log_nu"`` (log tie parameters) holds, in order.
    """

    source: MeatSource
    A: np.ndarray
    blocks: Mapping[str, slice]
    what: str
    stage_one: slice | None = None
    tie_labels: tuple[str, ...] = ()

    def covariance(self, data: Comparisons, cov_type: str, *, anchored_cov_type: str = "two-step",
                   cluster_correction: bool = False) -> np.ndarray:
        """Return ``A M A^T`` for the meat ``cov_type`` (:func:`meat_covariance`); ``q x q``."""
        if anchored_cov_type not in ANCHORED_COVS:
            raise ArgumentError(f"anchored_cov_type must be one of {ANCHORED_COVS}, got {anchored_cov_type!r}")
        A = self.A
        if anchored_cov_type == "fixed-basis" and self.stage_one is not None:
            A = A.copy()
            A[:, self.stage_one] = 0.0
        return meat_covariance(self.source.meat(data, cov_type), self.source.gram, A, cov_type, self.what,
                               cluster_correction)


def linearize(U: "Influence", st: "CellStats", what: str, **blocks: slice) -> Linearization:
    """Return a :class:`Linearization` of binary cells from factored influence ``U`` and the cells' ``st``.

    ``blocks`` name the rows of ``U.A`` (all of them ``"scores"`` when none is given).
    """
    return Linearization(MeatSource(U.J, st), U.A, blocks or {"scores": slice(0, U.A.shape[0])}, what)


def degenerate_meat(gram: np.ndarray, G: int | None, cov_type: str, what: str) -> bool:
    """Whether an empirical meat with ``G`` independent clusters cannot estimate a target's covariance.

    The target has ``p = rank(U)`` free directions (``gram = U^T U``); the meat is degenerate when
    ``G <= p`` (with one cluster in particular, the centred meat is exactly zero).  Warns
    with a :class:`~pydial.exceptions.CovarianceWarning` naming the meat, ``what``, ``G``
    and ``p``.  The model-based ``"fisher"`` covariance (``G = None``) is never degenerate here.
    """
    if G is None:
        return False
    ev = np.linalg.eigvalsh(gram) if gram.size else np.zeros(0)
    p = int(np.sum(ev > 1e-10 * max(float(np.max(ev, initial=0.0)), 1e-300)))
    if G > p:
        return False
    warnings.warn(CovarianceWarning(
        f"the {cov_type!r} covariance of {what} is degenerate: {G} independent cluster(s) for p = {p} estimated "
        f"direction(s) (a clustered meat needs more clusters than directions); its standard errors and intervals "
        f"are NaN. Use cov_type='binomial' or 'fisher', or more {'records' if cov_type == 'record' else 'judge-pair cells'}"),
        stacklevel=3)
    return True


@dataclass(frozen=True)
class Meat:
    """A meat ``S + sum_t a_t b_t^T`` in a parameter space.

    ``S`` is sparse (or dense), plus low-rank centering terms kept as factors, so nothing
    P x P is dense unless asked.
    """

    S: Any
    low: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    clusters: int | None = None  # independent clusters; None for the model-based meat

    def __add__(self, other: "Meat") -> "Meat":
        """Add two meats (their clusters add up); dense when either is."""
        G = None if self.clusters is None or other.clusters is None else self.clusters + other.clusters
        S = self.S + other.S if sp.issparse(self.S) and sp.issparse(other.S) else _dense(self.S) + _dense(other.S)
        return Meat(S, self.low + other.low, G)

    def sandwich(self, A: np.ndarray) -> np.ndarray:
        """Return ``A M A^T`` (q x q)."""
        out = np.asarray(A @ np.asarray(self.S @ A.T))
        for a, b in self.low:
            out += np.outer(A @ a, A @ b)
        return 0.5 * (out + out.T)

    def dense(self) -> np.ndarray:
        """``M`` as a dense array."""
        out = _dense(self.S).astype(float, copy=True)
        for a, b in self.low:
            out += np.outer(a, b)
        return out


def parameter_meat(J: Any, st: "CellStats", data: Comparisons | None, cov_type: str,
                   record_rows: Any = None) -> "Meat":
    r"""Return the meat ``sum_clusters g g^T`` in the parameter space of ``J`` (P x P).

    A comparison ``v`` with outcome ``o`` in cell ``c`` has the loss score
    ``g_v = sum_k S_{kco} j_{kc}`` over the derivative channels of ``J`` (row ``k m + c`` is
    channel ``k`` of cell ``c``; one channel ``eta`` and ``S = (p - 1, p)`` for binary cells,
    two with ties, :class:`CellStats`) and the influence ``w_v (g_v - \bar g_{block})``
    with the block means ``\bar g`` (eq. weighted-empirical-sandwich).  ``"fisher"`` is
    ``sum_c w_c^2 j_c^T I_c j_c`` (``I_c = st.fisher()``); ``"binomial"`` treats comparisons as
    independent; ``"cell"`` clusters LLM comparisons by (judge, pair) over both orders and
    outcomes (eq. cell-clustered-meat), human ones independent; ``"record"`` clusters all
    comparisons of a record (eq. hac-meat), ``record_rows = (record, cell, outcome)`` of every
    judgment (default ``st.record_rows(data)``).  Scores are summed per cell and channel before
    the Jacobian, so a :class:`FactoredJacobian` of binary cells is never formed.  ``data``
    (judge pairs and records) is needed by the clustered meats only.
    """
    check_cov_type(cov_type)
    w, h = st.w, st.is_human
    if cov_type == "fisher":
        return Meat(_channel_gram(J, w**2 * st.fisher()))
    n, s1 = st.totals(), st.score_sums()  # per cell and channel, the sum of its comparisons' scores
    C, m = s1.shape[0], w.size
    blocks = [mk for mk in (~h, h) if mk.any()]
    gbar = {bool(h[mk][0]): _rmatvec(_rows(J, np.tile(mk, C)), s1[:, mk].ravel()) / n[mk].sum() for mk in blocks}

    def independent(mk: np.ndarray) -> "Meat":  # the identity kernel of eq. hac-meat
        s2 = st.score_square_sums(mk)
        ub, wn = gbar[bool(h[mk][0])], np.sum(w[mk] ** 2 * n[mk])
        return Meat(_channel_gram(_rows(J, np.tile(mk, C)), w[mk] ** 2 * s2), ((ub, -ub * wn),), int(n[mk].sum()))

    if cov_type == "binomial":
        return _sum(independent(mk) for mk in blocks)
    assert data is not None, "the clustered meats need the data"
    if cov_type == "cell":
        out = [independent(h)] if h.any() else []
        if (~h).any():
            lm = ~h
            cl = _cluster_ids(st.pair_keys(data)[lm])
            G = int(np.max(cl, initial=-1)) + 1
            r = (w[lm] * s1[:, lm]).ravel()
            cnt_g = np.bincount(cl, weights=w[lm] * n[lm], minlength=G)[:, None]
            Jl = _rows(J, np.tile(lm, C))
            if C == 1 and isinstance(Jl, FactoredJacobian):  # the cluster sums never formed
                meat = _centered_meat(Jl.cluster_gram(cl, r), Jl.rmatvec(r * cnt_g[cl, 0])[:, None], cnt_g,
                                      gbar[False][:, None])
            else:
                meat = _centered_gram(_indicator(np.tile(cl, C), G) @ _scale_rows(Jl, r), cnt_g, gbar[False][:, None])
            out.append(replace(meat, clusters=G))
        return _sum(out)
    rows = record_rows if record_rows is not None else st.record_rows(data)
    if rows is None:
        raise _no_records()
    rec, cell, outc = (np.asarray(x, np.int64) for x in rows)
    n_rec = len(data.record_ids)
    S = st.outcome_scores()
    # IF of a judgment: w (g - gbar_block); aggregated to (record, cell, channel) first
    coef = sp.csr_matrix(((w[cell] * S[:, cell, outc]).ravel(), (np.tile(rec, C), (np.arange(C)[:, None] * m + cell).ravel())),
                         shape=(n_rec, C * m))
    Gs = coef @ as_sparse(J)
    flags = [f for f in (False, True) if f in gbar]
    hr = h[cell]
    Cm = np.column_stack([np.bincount(rec[hr == f], weights=w[cell[hr == f]], minlength=n_rec) for f in flags])
    B = np.column_stack([gbar[f] for f in flags])
    return replace(_centered_gram(Gs, Cm, B), clusters=int(np.unique(rec).size))


def _channel_gram(J: Any, D: np.ndarray) -> Any:
    """``sum_{k,l} J_k^T diag(D_kl) J_l`` over the channel blocks ``J_k`` (rows ``k m`` to ``(k+1) m``); ``D`` symmetric."""
    C = D.shape[0]
    if C == 1:
        return _gram(J, D[0, 0])
    dense = J.shape[1] <= _DENSE_GRAM
    J = _dense(as_sparse(J)) if dense else sp.csr_matrix(J)
    m = J.shape[0] // C
    Jk = [J[k * m:(k + 1) * m] for k in range(C)]
    out = np.zeros((J.shape[1], J.shape[1])) if dense else sp.csr_matrix((J.shape[1], J.shape[1]))
    for k in range(C):
        out = out + _gram(Jk[k], D[k, k])
        for t in range(k + 1, C):
            cross = Jk[k].T @ _scale_rows(Jk[t], D[k, t])
            out = out + cross + cross.T
    return out if dense else out.tocsr()


# ------------------------------------------------------- sparse/dense helpers
def _no_records() -> Exception:
    from pydial.exceptions import DataError

    return DataError("cov_type='record' clusters the comparisons by record id, but these data carry no record ids "
                     "(built from aggregated counts by Comparisons.from_counts); use cov_type='cell', 'binomial' or "
                     "'fisher', or load the judgments row by row")


def _dense(M: Any) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def _vec(x: Any) -> np.ndarray:
    return np.asarray(x).ravel()


def as_sparse(J: Any) -> Any:
    """``J`` itself, or a :class:`FactoredJacobian` formed as a sparse matrix."""
    return J.tocsr() if isinstance(J, FactoredJacobian) else J


def _rows(J: Any, mask: np.ndarray) -> Any:
    """Rows of ``J`` where ``mask`` holds (a view when the mask covers everything)."""
    if mask.all():
        return J
    return J.rows(mask) if isinstance(J, FactoredJacobian) else J[mask]


def _rmatvec(J: Any, r: np.ndarray) -> np.ndarray:
    """``J^T r`` as a vector."""
    return J.rmatvec(r) if isinstance(J, FactoredJacobian) else _vec(J.T @ r)


def _cluster_ids(key: np.ndarray) -> np.ndarray:
    """Cluster ids ``0..G-1`` of integer keys, in the order of the keys.

    The ids of ``numpy.unique(key, return_inverse=True)``; one pass when the keys are sorted.
    """
    if key.size and bool(np.all(key[1:] >= key[:-1])):
        cl = np.empty(key.size, np.int64)
        cl[0] = 0
        np.cumsum(key[1:] != key[:-1], out=cl[1:])
        return cl
    return np.unique(key, return_inverse=True)[1].ravel()


def _scale_rows(J: Any, d: np.ndarray) -> Any:
    return sp.diags(d) @ J if sp.issparse(J) else d[:, None] * J


def _gram(J: Any, d: np.ndarray) -> Any:
    """``J^T diag(d) J``."""
    if isinstance(J, FactoredJacobian):
        return J.gram(d)
    if sp.issparse(J) and J.shape[1] > _DENSE_GRAM:
        J = sp.csr_matrix(J)
        return (J.T @ _scale_rows(J, d)).tocsr()
    J = _dense(J)
    return (J.T * d) @ J


_DENSE_GRAM = 64
"""Most columns for which :func:`_gram` multiplies densely (faster than sparse products at that size)."""


def _centered_gram(Gs: Any, C: np.ndarray, B: np.ndarray) -> "Meat":
    """``(Gs - C B^T)^T (Gs - C B^T)`` without forming the dense cluster matrix (:func:`_centered_meat`)."""
    G = sp.csr_matrix(Gs) if sp.issparse(Gs) else Gs
    return _centered_meat((G.T @ G).tocsr() if sp.issparse(G) else G.T @ G, np.asarray(Gs.T @ C), C, B)


def _centered_meat(GtG: Any, X: np.ndarray, C: np.ndarray, B: np.ndarray) -> "Meat":
    """``(Gs - C B^T)^T (Gs - C B^T)`` from ``GtG = Gs^T Gs`` and ``X = Gs^T C``.

    It is ``Gs^T Gs`` plus the low-rank terms ``-X B^T - B X^T + B (C^T C) B^T``.
    """
    CC = C.T @ C
    low = []
    for t in range(B.shape[1]):
        low += [(X[:, t], -B[:, t]), (B[:, t], -X[:, t]), (B[:, t], B @ CC[:, t])]
    return Meat(GtG, tuple(low))


def _sum(mats: Any) -> "Meat":
    out: Meat | None = None
    for m in mats:
        out = m if out is None else out + m
    assert out is not None, "no meats to add"
    return out


def _indicator(groups: np.ndarray, G: int) -> sp.csr_matrix:
    """Return the sparse cluster-indicator matrix (G x m) of integer groups ``0..G-1``."""
    return sp.csr_matrix((np.ones(groups.size), (groups, np.arange(groups.size))), shape=(G, groups.size))
