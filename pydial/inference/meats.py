r"""Sandwich meats of DIAL estimators from per-comparison influence contributions.

A target is linearized as ``t_hat - t ~ sum_v IF_v``, ``IF_v = w_v {(p_c(v) - z_v) u_c(v) - u_bar_block(v)}``
(eq. weighted-empirical-sandwich): ``u_c = A grad eta_c`` the cell's influence direction, ``u_bar`` the
within-block mean (human and LLM blocks centered separately).  The covariance ``sum over clusters of
(sum IF_v)(sum IF_v)^T`` has the clusters of :data:`COV_TYPES` (eq. cell-clustered-meat, eq. hac-meat).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, cast

import numpy as np
import scipy.sparse as sp

from pydial.data.comparisons import Comparisons
from pydial.exceptions import CovarianceWarning, DataError
from pydial.model.design import dense_design
from pydial.resources import check_choice

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
    return check_choice("cov_type", cov_type, COV_TYPES)


@dataclass(frozen=True)
class CellStats:
    r"""Counts and fitted statistics of the cells, LLM then human (stacked order of :class:`pydial.model.cells.Cells`).

    Binary cells: ``y`` wins and fitted ``p``, score ``p - z``.  Outcome cells
    (:meth:`outcomes`): ``(m, 3)`` ``counts``, ``P`` and ``a = d log P / d eta``, ``b = d log P / d l``
    (``i`` wins, ``j`` wins, tie), ``information`` optionally the observed information (then ``"fisher"``
    is observed).  ``pair_key``: each cell's judge-pair key when given (:meth:`pair_keys`).
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
    pair_key: np.ndarray | None = None

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
        return cast(np.ndarray, self.y), cast(np.ndarray, self.p)

    def _outcome_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return cast(np.ndarray, self.counts), cast(np.ndarray, self.P), cast(np.ndarray, self.a), cast(np.ndarray, self.b)

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions in ``data.llm`` of the LLM cells and in ``data.human`` of the human cells, in cell order."""
        h = self.is_human
        return np.arange(int(np.count_nonzero(~h))), np.arange(int(np.count_nonzero(h)))

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

    def score_sums(self) -> np.ndarray:
        """Sum of the cell's comparisons' scores per channel, ``(C, m)``: ``n p - y`` for binary cells."""
        if self.binary:
            y, p = self._yp()
            return (self.n * p - y)[None]
        return np.einsum("mo,kmo->km", np.asarray(self._outcome_arrays()[0], float), self.outcome_scores())

    def score_square_sums(self, mask: np.ndarray) -> np.ndarray:
        """Sum of the channels' score products over the comparisons of cells ``mask``, ``(C, C, m')``."""
        if self.binary:
            y, p = (x[mask] for x in self._yp())
            return (y * (p - 1) ** 2 + (self.n[mask] - y) * p**2)[None, None]
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
        """``(record, cell, outcome)`` of every decisive judgment in binary cells; None without records or for outcome cells."""
        R = data.rows
        if R is None or not self.binary:
            return None
        h, n_l = self.is_human, len(data.llm)
        cell_of = np.full(n_l + len(data.human), -1)  # the cell of each row of data.llm, then of data.human (-1: none)
        cell_of[: np.count_nonzero(~h)] = np.flatnonzero(~h)  # the cells are in the order of data.llm, data.human
        cell_of[n_l: n_l + np.count_nonzero(h)] = np.flatnonzero(h)
        pos = cell_of[R.cell + np.where(R.judge == data.K, n_l, 0)]
        used = pos >= 0
        return R.record[used], pos[used], np.where(R.z[used] == 1, 0, 1)


@dataclass(frozen=True, eq=False)
class BlockJacobian:
    """Cell Jacobians (sparse or factored) stacked block-diagonally; the meats' products are formed block by block."""

    blocks: tuple[Any, ...]

    @property
    def shape(self) -> tuple[int, int]:
        """``(sum of the rows, sum of the columns)``."""
        return sum(b.shape[0] for b in self.blocks), sum(b.shape[1] for b in self.blocks)

    def _split(self, x: np.ndarray) -> list[np.ndarray]:
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
        """``sum_k g_k g_k^T``, ``g_k = sum_{c in k} r_c j_c``, on the rows of one block (clusters do not span blocks)."""
        (k,) = [k for k, b in enumerate(self.blocks) if b.shape[0]]
        b = self.blocks[k]
        if _factored(b):
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


def meat_covariance(M: "Meat", JtJ: Callable[[], Any], A: np.ndarray | None, cov_type: str, what: str,
                    correction: bool = False) -> np.ndarray:
    """Return ``A M A^T`` (``M`` when ``A`` is None), all NaN when the meat is degenerate (:func:`degenerate_meat`).

    ``JtJ()`` returns ``J^T J``; ``correction`` scales a clustered meat by ``G/(G-1)``.
    """
    C = M.dense() if A is None else M.sandwich(A)
    # the model-based meat is never degenerate, nor one with more clusters than the target has
    # directions (at most the rows of A): no Gram matrix needed then
    if M.clusters is not None and M.clusters <= (C.shape[0] if A is None else min(A.shape)):
        G = JtJ()
        gram = dense_design(G) if A is None else np.asarray(A @ dense_design(G @ A.T))
        if degenerate_meat(gram, M.clusters, cov_type, what):
            return np.full_like(C, np.nan)
    if correction and cov_type in CLUSTERED and M.clusters is not None:
        C = C * (M.clusters / (M.clusters - 1.0))
    return C


@dataclass(eq=False)
class MeatSource:
    """The cells behind a covariance: the Jacobian ``J`` of their predictors and their :class:`CellStats`.

    Each meat is computed once per data set and type, shared by the targets of a fit and later ``with_cov`` calls.
    """

    J: Any
    stats: "CellStats"
    record_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    _meats: dict[tuple[str, int], "Meat"] = field(default_factory=dict, init=False, repr=False)
    _jtj: Any = field(default=None, init=False, repr=False)

    def meat(self, data: Comparisons, cov_type: str) -> "Meat":
        """Return the meat of type ``cov_type`` in the parameter space of ``J`` (clusters from ``data``)."""
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
    """Influence ``u_c = A j_c`` of a group of targets on a fit's cells; covariance ``A M A^T`` on demand.

    ``blocks`` names the rows of ``A`` (``"scores"``, ``"b"``, ``"log_nu"`` ...); ``what`` names the targets in
    warnings; ``stage_one`` are the columns of ``A`` carrying the LLM stage's error, which
    ``anchored_cov_type="fixed-basis"`` drops (Cor. uniform-lambda); ``tie_labels`` the judges of ``"log_nu"``.
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
        check_choice("anchored_cov_type", anchored_cov_type, ANCHORED_COVS)
        A = self.A
        if anchored_cov_type == "fixed-basis" and self.stage_one is not None:
            A = A.copy()
            A[:, self.stage_one] = 0.0
        return meat_covariance(self.source.meat(data, cov_type), self.source.gram, A, cov_type, self.what,
                               cluster_correction)


def degenerate_meat(gram: np.ndarray, G: int | None, cov_type: str, what: str) -> bool:
    """Whether ``G`` clusters are too few for ``p = rank(gram) >= G`` directions (then warns); never for ``G = None``."""
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
    """A meat ``S + sum_t a_t b_t^T``: ``S`` sparse or dense, the low-rank centering terms kept as factors."""

    S: Any
    low: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    clusters: int | None = None  # independent clusters; None for the model-based meat

    def __add__(self, other: "Meat") -> "Meat":
        """Add two meats (their clusters add up); dense when either is."""
        G = None if self.clusters is None or other.clusters is None else self.clusters + other.clusters
        S = self.S + other.S if sp.issparse(self.S) and sp.issparse(other.S) else dense_design(self.S) + dense_design(other.S)
        return Meat(S, self.low + other.low, G)

    def sandwich(self, A: np.ndarray) -> np.ndarray:
        """Return ``A M A^T`` (q x q); a sparse ``S`` filled beyond :data:`_DENSE_FILL` is multiplied densely, by row blocks."""
        S, At = self.S, A.T
        if sp.issparse(S) and S.nnz > _DENSE_FILL * np.prod(S.shape):
            S, SAt = sp.csr_matrix(S), np.empty((S.shape[0], A.shape[0]))
            for r in range(0, S.shape[0], 512):
                SAt[r : r + 512] = S[r : r + 512].toarray() @ At
        else:
            SAt = np.asarray(S @ At)
        out = np.asarray(A @ SAt)
        for a, b in self.low:
            out += np.outer(A @ a, A @ b)
        return 0.5 * (out + out.T)

    def dense(self) -> np.ndarray:
        """``M`` as a dense array."""
        out = dense_design(self.S).astype(float, copy=True)
        for a, b in self.low:
            out += np.outer(a, b)
        return out


def parameter_meat(J: Any, st: "CellStats", data: Comparisons | None, cov_type: str,
                   record_rows: Any = None) -> "Meat":
    r"""Return the meat ``sum_clusters g g^T`` in the parameter space of ``J`` (P x P).

    A comparison's score is ``g_v = sum_k S_kco j_kc`` over the channels of ``J`` (row ``k m + c``), its
    influence ``w_v (g_v - g_bar_block)``; ``record_rows`` default ``st.record_rows(data)``.  Scores are
    summed per cell before the Jacobian, so a factored ``J`` of binary cells is never formed.
    """
    check_cov_type(cov_type)
    w, h = st.w, st.is_human
    if cov_type == "fisher":
        return Meat(_channel_gram(J, w**2 * st.fisher()))
    n, s1 = st.n, st.score_sums()  # per cell and channel, the sum of its comparisons' scores
    C, m = s1.shape[0], w.size
    blocks = [mk for mk in (~h, h) if mk.any()]
    gbar = {bool(h[mk][0]): _rmatvec(_rows(J, np.tile(mk, C)), s1[:, mk].ravel()) / n[mk].sum() for mk in blocks}

    def independent(mk: np.ndarray) -> "Meat":  # the identity kernel of eq. hac-meat
        s2 = st.score_square_sums(mk)
        ub, wn = gbar[bool(h[mk][0])], np.sum(w[mk] ** 2 * n[mk])
        return Meat(_channel_gram(_rows(J, np.tile(mk, C)), w[mk] ** 2 * s2), ((ub, -ub * wn),), int(n[mk].sum()))

    if cov_type == "binomial":
        return functools.reduce(Meat.__add__, [independent(mk) for mk in blocks])
    assert data is not None, "the clustered meats need the data"
    if cov_type == "cell":
        out, lm = ([independent(h)] if h.any() else []), ~h
        if lm.any():
            cl = _cluster_ids(st.pair_keys(data)[lm])
            G = int(np.max(cl, initial=-1)) + 1
            r = (w[lm] * s1[:, lm]).ravel()
            cnt_g = np.bincount(cl, weights=w[lm] * n[lm], minlength=G)[:, None]
            Jl = _rows(J, np.tile(lm, C))
            if C == 1 and _factored(Jl):  # the cluster sums never formed
                meat = _centered_meat(Jl.cluster_gram(cl, r), Jl.rmatvec(r * cnt_g[cl, 0])[:, None], cnt_g,
                                      gbar[False][:, None])
            else:
                meat = _centered_gram(_indicator(np.tile(cl, C), G) @ _scale_rows(Jl, r), cnt_g, gbar[False][:, None])
            out.append(replace(meat, clusters=G))
        return functools.reduce(Meat.__add__, out)
    rows = record_rows if record_rows is not None else st.record_rows(data)
    if rows is None:
        raise DataError("cov_type='record' clusters the comparisons by record id, but these data carry no record ids "
                        "(built from aggregated counts by Comparisons.from_counts); use cov_type='cell', 'binomial' or "
                        "'fisher', or load the judgments row by row")
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
    J = dense_design(as_sparse(J)) if dense else sp.csr_matrix(J)
    m = J.shape[0] // C
    Jk = [J[k * m:(k + 1) * m] for k in range(C)]
    out: Any = np.zeros((J.shape[1], J.shape[1])) if dense else sp.csr_matrix((J.shape[1], J.shape[1]))
    for k in range(C):
        out = out + _gram(Jk[k], D[k, k])
        for t in range(k + 1, C):
            cross = Jk[k].T @ _scale_rows(Jk[t], D[k, t])
            out = out + cross + cross.T
    return out if dense else out.tocsr()


# ------------------------------------------------------- sparse/dense helpers
def _factored(J: Any) -> bool:
    """Whether ``J`` forms the meats' products itself (the methods of :class:`BlockJacobian`, e.g. ``CellJacobian``)."""
    return hasattr(J, "cluster_gram")


def as_sparse(J: Any) -> Any:
    """``J`` itself, or a factored Jacobian (:func:`_factored`) formed as a sparse matrix."""
    return J.tocsr() if _factored(J) else J


def _rows(J: Any, mask: np.ndarray) -> Any:
    """Rows of ``J`` where ``mask`` holds (a view when the mask covers everything)."""
    if mask.all():
        return J
    return J.rows(mask) if _factored(J) else J[mask]


def _rmatvec(J: Any, r: np.ndarray) -> np.ndarray:
    return J.rmatvec(r) if _factored(J) else np.asarray(J.T @ r).ravel()


def _cluster_ids(key: np.ndarray) -> np.ndarray:
    """Cluster ids ``0..G-1`` of integer keys (``numpy.unique``'s inverse; one pass when sorted)."""
    if key.size and bool(np.all(key[1:] >= key[:-1])):
        cl = np.empty(key.size, np.int64)
        cl[0] = 0
        np.cumsum(key[1:] != key[:-1], out=cl[1:])
        return cl
    return np.unique(key, return_inverse=True)[1].ravel()


def _scale_rows(J: Any, d: np.ndarray) -> Any:
    return sp.diags(d) @ J if sp.issparse(J) else d[:, None] * J


def _gram(J: Any, d: np.ndarray) -> Any:
    if _factored(J):
        return J.gram(d)
    if sp.issparse(J) and J.shape[1] > _DENSE_GRAM:
        J = sp.csr_matrix(J)
        return (J.T @ _scale_rows(J, d)).tocsr()
    J = dense_design(J)
    return (J.T * d) @ J


_DENSE_FILL = 0.05
"""Share of nonzero entries above which a sparse meat is multiplied as dense row blocks (BLAS beats the sparse
product there: at N = 1,000 a 26% filled 4,304 x 4,304 meat against 1,000 targets takes 0.9 s instead of 2.9 s)."""

_DENSE_GRAM = 64
"""Most columns for which :func:`_gram` multiplies densely (faster than sparse products at that size)."""


def _centered_gram(Gs: Any, C: np.ndarray, B: np.ndarray) -> "Meat":
    """``(Gs - C B^T)^T (Gs - C B^T)`` without forming the dense cluster matrix (:func:`_centered_meat`)."""
    G = sp.csr_matrix(Gs) if sp.issparse(Gs) else Gs
    return _centered_meat((G.T @ G).tocsr() if sp.issparse(G) else G.T @ G, np.asarray(Gs.T @ C), C, B)


def _centered_meat(GtG: Any, X: np.ndarray, C: np.ndarray, B: np.ndarray) -> "Meat":
    """``(Gs - C B^T)^T (Gs - C B^T)`` from ``GtG = Gs^T Gs`` and ``X = Gs^T C``, the centering as low-rank terms."""
    CC = C.T @ C
    low = []
    for t in range(B.shape[1]):
        low += [(X[:, t], -B[:, t]), (B[:, t], -X[:, t]), (B[:, t], B @ CC[:, t])]
    return Meat(GtG, tuple(low))


def _indicator(groups: np.ndarray, G: int) -> sp.csr_matrix:
    return sp.csr_matrix((np.ones(groups.size), (groups, np.arange(groups.size))), shape=(G, groups.size))
