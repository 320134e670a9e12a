r"""Covariances of DIAL estimators from per-comparison influence contributions.

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
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.stats import norm

from .data import Comparisons
from .exceptions import CovarianceWarning

COV_TYPES: tuple[str, ...] = ("fisher", "binomial", "cell", "record")
COV_DESCRIPTIONS = {
    "fisher": "model-based (Fisher information)",
    "binomial": "sandwich, independent comparisons (binomial meat)",
    "cell": "sandwich, clustered by judge-pair cell (eq. cell-clustered-meat)",
    "record": "sandwich, clustered by record (eq. hac-meat, record kernel)",
}


def check_cov_type(cov: str) -> str:
    """Validate a meat name against :data:`COV_TYPES`."""
    if cov not in COV_TYPES:
        raise ValueError(f"cov must be one of {COV_TYPES}, got {cov!r}")
    return cov


@dataclass(frozen=True)
class CellStats:
    """Cell counts and fitted probabilities in the stacked order of
    :class:`pydial.likelihood.Cells` (LLM cells, then human cells).

    ``llm_index`` / ``human_index`` give each cell's position in ``data.llm`` /
    ``data.human`` (``-1`` where not applicable), used for clustering.
    """

    n: np.ndarray
    y: np.ndarray
    p: np.ndarray
    w: np.ndarray
    is_human: np.ndarray
    llm_index: np.ndarray
    human_index: np.ndarray

    @classmethod
    def from_parts(cls, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, float, bool]]) -> "CellStats":
        """Stack ``(n, y, p, w, is_human)`` groups; LLM groups must cover ``data.llm`` in order."""
        n = np.concatenate([x[0] for x in parts])
        y = np.concatenate([x[1] for x in parts])
        p = np.concatenate([x[2] for x in parts])
        w = np.concatenate([np.full(x[0].size, x[3], float) for x in parts])
        h = np.concatenate([np.full(x[0].size, x[4]) for x in parts])
        li = np.full(n.size, -1)
        hi = np.full(n.size, -1)
        li[~h] = np.arange((~h).sum())
        hi[h] = np.arange(h.sum())
        return cls(n, y, p, w, h, li, hi)


def influence_covariance(U: np.ndarray, st: CellStats, data: Comparisons, cov: str, *,
                         what: str = "the estimates") -> np.ndarray:
    """Covariance ``sum_clusters (sum IF)(sum IF)^T`` of a linearized target.

    Parameters
    ----------
    U : ndarray (m, q)
        Influence direction ``u_c`` of every cell (stacked order of ``st``).
    st : CellStats
        Counts, fitted probabilities and weights of the same cells.
    data : Comparisons
        Supplies the judge-pair and record structure for clustering.
    cov : {"fisher", "binomial", "cell", "record"}
    what : str
        Name of the target, for the warning of :func:`degenerate_meat`.

    Returns
    -------
    ndarray (q, q)
        All NaN when the sandwich meat is degenerate (see :func:`degenerate_meat`).
    """
    C, G = _meat(U, st, data, cov)
    return np.full_like(C, np.nan) if degenerate_meat(U, G, cov, what) else C


def degenerate_meat(U: np.ndarray, G: int | None, cov: str, what: str) -> bool:
    """Whether an empirical meat with ``G`` independent clusters cannot estimate the
    covariance of a target with ``p = rank(U)`` free directions: ``G <= p`` (with one
    cluster in particular, the centred meat is exactly zero).  Warns with a
    :class:`~pydial.exceptions.CovarianceWarning` naming the meat, ``what``, ``G`` and
    ``p``.  The model-based ``"fisher"`` covariance (``G = None``) is never degenerate here.
    """
    if G is None:
        return False
    gram = U.T @ U
    ev = np.linalg.eigvalsh(gram) if gram.size else np.zeros(0)
    p = int(np.sum(ev > 1e-10 * max(float(ev.max(initial=0.0)), 1e-300)))
    if G > p:
        return False
    warnings.warn(CovarianceWarning(
        f"the {cov!r} covariance of {what} is degenerate: {G} independent cluster(s) for p = {p} estimated "
        f"direction(s) (a clustered meat needs more clusters than directions); its standard errors and intervals "
        f"are NaN. Use cov='binomial' or 'fisher', or more {'records' if cov == 'record' else 'judge-pair cells'}"),
        stacklevel=3)
    return True


def _meat(U: np.ndarray, st: CellStats, data: Comparisons, cov: str) -> tuple[np.ndarray, int | None]:
    """The covariance of :func:`influence_covariance` and its number of independent
    clusters (``None`` for the model-based ``"fisher"``)."""
    check_cov_type(cov)
    n, y, p, w = st.n, st.y, st.p, st.w
    if cov == "fisher":
        return (U.T * (w**2 * n * p * (1 - p))) @ U, None
    s1 = n * p - y  # sum over the cell's comparisons of (p - z_v)
    blocks = [m for m in (~st.is_human, st.is_human) if m.any()]
    ubar = {}
    for m in blocks:
        ubar[bool(st.is_human[m][0])] = (s1[m] @ U[m]) / n[m].sum()
    if cov == "binomial":
        return sum(independent_meat(U[m], n[m], y[m], p[m], w[m]) for m in blocks), int(n.sum())
    if cov == "cell":
        out = np.zeros((U.shape[1], U.shape[1]))
        h = st.is_human
        G = int(n[h].sum())
        if h.any():  # human comparisons independent
            out += independent_meat(U[h], n[h], y[h], p[h], w[h])
        if (~h).any():
            lm = np.flatnonzero(~h)
            L = data.llm
            li = st.llm_index[lm]
            key = (L.judge[li] * data.N + L.i[li]) * data.N + L.j[li]
            _, cl = np.unique(key, return_inverse=True)
            S = _group_sum(cl, w[lm, None] * (s1[lm, None] * U[lm] - n[lm, None] * ubar[False]))
            out += S.T @ S
            G += S.shape[0]
        return out, G
    # record kernel
    R = data.rows
    n_llm_cells = len(data.llm)
    # stacked position of each decisive row's cell
    pos_llm = np.full(n_llm_cells, -1)
    pos_llm[st.llm_index[~st.is_human]] = np.flatnonzero(~st.is_human)
    pos_h = np.full(len(data.human), -1)
    pos_h[st.human_index[st.is_human]] = np.flatnonzero(st.is_human)
    is_h_row = R.judge == data.K
    pos = np.full(R.cell.size, -1)
    pos[is_h_row] = pos_h[R.cell[is_h_row]]
    pos[~is_h_row] = pos_llm[R.cell[~is_h_row]]
    used = pos >= 0
    rec, pos, z = R.record[used], pos[used], R.z[used]
    # IF of a row: w (p - z) u - w ubar_block ; aggregate rows to (record, cell) first.
    coef = sp.coo_matrix((w[pos] * (p[pos] - z), (rec, pos)), shape=(len(data.record_ids), st.n.size)).tocsr()
    G = coef @ U
    for hflag in (False, True):
        if hflag in ubar:
            m = st.is_human[pos] == hflag
            cnt = np.bincount(rec[m], weights=w[pos[m]], minlength=len(data.record_ids))
            G -= np.outer(cnt, ubar[hflag])
    return G.T @ G, int(np.unique(rec).size)


def independent_meat(U: np.ndarray, n: np.ndarray, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> np.ndarray:
    r"""``sum_v IF_v IF_v^T`` for one block of independent comparisons (identity kernel
    of eq. hac-meat), ``IF_v = w_v {(p_c - z_v) u_c - \bar u}`` with the block mean
    ``\bar u = sum_c (n_c p_c - y_c) u_c / n_block``; a cell contributes
    ``w^2 [y (1-p)^2 + (n-y) p^2] u u^T`` (weights constant within the block)."""
    ub = ((n * p - y) @ U) / n.sum()
    s2 = y * (1 - p) ** 2 + (n - y) * p**2
    return (U.T * (w**2 * s2)) @ U - np.outer(ub, ub) * np.sum(w**2 * n)


def _group_sum(groups: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Row sums of ``X`` within integer groups ``0..G-1``."""
    G = groups.max() + 1 if groups.size else 0
    M = sp.coo_matrix((np.ones(groups.size), (groups, np.arange(groups.size))), shape=(G, groups.size)).tocsr()
    return np.asarray(M @ X)


def wald_table(est: np.ndarray, cov: np.ndarray, index: list[str], level: float, name: str) -> pd.DataFrame:
    """``name, se, ci_low, ci_high, z, p_value`` for a vector estimate with covariance."""
    var = np.diag(cov).astype(float)
    zero = np.isfinite(var) & (var <= 1e-13 * max(float(np.nanmax(np.abs(var), initial=0.0)), 1e-300))
    if zero.any():
        who = ", ".join(str(index[k]) for k in np.flatnonzero(zero)[:6])
        warnings.warn(CovarianceWarning(f"the covariance of {name} has zero variance for {who} ({int(zero.sum())} in "
                                        "all): their standard errors and intervals are NaN, not 0"), stacklevel=3)
        var = np.where(zero, np.nan, var)
    se = np.sqrt(np.clip(var, 0.0, None))
    zq = norm.ppf(0.5 + level / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = est / se
    return pd.DataFrame(
        {name: est, "se": se, "ci_low": est - zq * se, "ci_high": est + zq * se, "z": z, "p_value": 2 * norm.sf(np.abs(z))},
        index=pd.Index(index),
    )
