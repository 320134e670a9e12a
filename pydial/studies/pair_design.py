r"""Which human comparisons to collect next: :func:`next_pairs`, from the current fit.

It is a greedy sequential design on the calibration block: with the block's sandwich covariance :math:`K_c` of the
current fit, one more human comparison on :math:`(i,j)` adds information :math:`p_{ij}(1-p_{ij})xx^\top`,
:math:`x=B^\top(e_i-e_j)` (``B = ds/dc``), so by Sherman-Morrison
:math:`K_c\leftarrow K_c-\frac{w K_cxx^\top K_c}{1+w\,x^\top K_cx}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, ndtr

from pydial.data.comparisons import Comparisons
from pydial.estimation.results import DialResult
from pydial.exceptions import ArgumentError, DataError
from pydial.model.chart import centering_basis, difference_design
from pydial.resources import check_bytes, check_choice, check_count
from pydial.studies.planning import OBJECTIVES, check_k, pilot_data, resolve_contrast, staged_parts


@dataclass(frozen=True)
class CalibrationBlock:
    """The human-calibrated part of a fit's covariance, ``cov = other + B K B^T``.

    ``B = ds/dc`` (centering basis for ``human``, else the anchored ``M``), ``K`` the sandwich of ``c`` from the human
    comparisons, ``other`` the LLM stage, ``s`` the scores.
    """

    s: np.ndarray
    B: np.ndarray
    K: np.ndarray
    other: np.ndarray


def calibration_block(result: DialResult, *, data: Comparisons | None = None) -> CalibrationBlock:
    """Split the fit's covariance (the sandwich's influence functions) into :class:`CalibrationBlock` and the rest."""
    data = pilot_data(result, data)
    s = result.scores["score"].to_numpy(float)
    C = result.cov.to_numpy(float)
    if not np.all(np.isfinite(C)):
        raise DataError(f"result (method {result.method!r}) has no covariance to plan from")
    if result.method == "human" or data.K == 0:
        B, V_h = centering_basis(data.N), C
    else:
        B, _, V_h, _ = staged_parts(result, data)
    Bp = np.linalg.pinv(B)
    K = Bp @ V_h @ Bp.T
    K = 0.5 * (K + K.T)
    return CalibrationBlock(s, B, K, C - B @ K @ B.T)


def _costs(costs: Any, items: tuple[str, ...], pairs: np.ndarray) -> np.ndarray:
    out = np.ones(pairs.shape[0])
    if costs is None:
        return out
    if isinstance(costs, pd.DataFrame):
        need = {"item_a", "item_b", "cost"}
        if not need <= set(costs.columns):
            raise DataError(f"costs must have columns {sorted(need)}, got {list(costs.columns)}")
        costs = {(a, b): c for a, b, c in costs[["item_a", "item_b", "cost"]].itertuples(index=False)}
    if not isinstance(costs, Mapping):
        raise DataError(f"costs must be a mapping {{(item_a, item_b): cost}} or a DataFrame, got {type(costs).__name__}")
    index = {(items[i], items[j]): t for t, (i, j) in enumerate(pairs)}
    for (a, b), c in costs.items():
        t = index.get((a, b), index.get((b, a)))
        if t is None:
            raise DataError(f"costs: unknown pair ({a!r}, {b!r})")
        c = float(c)
        if not np.isfinite(c) or c <= 0:
            raise DataError(f"costs: the cost of ({a!r}, {b!r}) must be positive and finite, got {c!r}")
        out[t] = c
    return out


GREEDY_STEP_SECONDS = 3e-5  # per greedy step of next_pairs: numpy call overhead (measured)
GREEDY_ENTRY_SECONDS = 1.6e-8  # per pair x (contrast + coordinate) entry of a step (measured)
GREEDY_MAX_SECONDS = 600.0
"""Longest run :func:`next_pairs` starts (by its estimate): propose in batches, refitting between them."""


def _check_greedy_size(n: int, N: int, d: int, h: int) -> None:
    """Refuse ``next_pairs`` requests whose greedy loop would exceed :data:`GREEDY_MAX_SECONDS` or the memory."""
    n_pairs = N * (N - 1) // 2
    entries = n_pairs * (h + d + 2) * max(d, 1)
    step = GREEDY_STEP_SECONDS + entries * GREEDY_ENTRY_SECONDS
    check_bytes(8 * (n_pairs * (4 * d + 8) + h * (N + n_pairs + d)), f"next_pairs with {N:,} items and {h:,} contrasts",
                "use objective='contrast' or 'D', or a smaller k", detail=f"{n_pairs:,} pairs x {h:,} contrasts x 8 B")
    if n * step > GREEDY_MAX_SECONDS:
        most = max(1, int(GREEDY_MAX_SECONDS / step))
        raise ArgumentError(f"next_pairs(n={n:,}) would take about {n * step:,.3g} s ({n:,} greedy steps over "
                            f"{n_pairs:,} pairs, ~{step:.2g} s each; the limit is {GREEDY_MAX_SECONDS:.0f} s); "
                            f"propose at most about {most:,} at once: collect those labels, refit, and call "
                            "next_pairs again")


def next_pairs(result: DialResult, n: int, objective: str = "contrast", *, data: Comparisons | None = None,
               target: Any = None, k: int = 1, costs: Any = None) -> pd.DataFrame:
    r"""Propose the next ``n`` human comparisons by greedy sequential design.

    Each step picks the pair with the largest predicted reduction of the objective per unit cost, then updates the
    calibration block's covariance ``K`` by Sherman-Morrison with that comparison's information ``p(1-p) x x^T`` (see
    ``help(pydial.studies.pair_design)``; fitted ``p`` of the current fit).

    Parameters
    ----------
    result : DialResult
        The current fit.
    n : int
        Number of comparisons to propose.
    objective : {"contrast", "ranking", "D"}
        ``"contrast"``: variance of the named contrast ``target`` (default top-1 vs top-2).  ``"ranking"``: the top-k
        boundary, ``sum_{a in top k, b not} w_ab Var(s_a - s_b)`` with ``w_ab = Phi(-|s_a - s_b| / se_ab)``, the
        probability the pair is misordered (weights at the current fit).  ``"D"``: ``log det K`` of the calibration
        block (D-optimal design).
    data : Comparisons, optional
        The data of the current fit, by default ``result.data``; a data set other than the fit's raises
        :class:`~pydial.DataError`.
    target : str or (str, str), optional
        The contrast of ``objective="contrast"``.
    k : int
        Size of the top set of ``objective="ranking"``.
    costs : mapping {(item_a, item_b): cost} or DataFrame (item_a, item_b, cost), optional
        Per-pair labelling costs (default 1); the greedy step maximizes reduction per cost.

    Returns
    -------
    DataFrame
        One row per proposed pair: ``item_a, item_b, n`` (labels), ``variance_reduction`` (summed predicted reduction of
        the objective by those labels), ``cost`` (total), ``first_step``.  ``attrs``: ``objective``, ``before``,
        ``after``.
    """
    check_choice("objective", objective, OBJECTIVES)
    check_count(n, "n")
    blk = calibration_block(result, data=data)
    items = tuple(result.items)
    N = len(items)
    if objective == "ranking":
        k = check_k(k, N)
    _check_greedy_size(int(n), N, blk.B.shape[1], k * (N - k) if objective == "ranking" else int(objective != "D"))
    pi, pj = np.triu_indices(N, 1)
    cost = _costs(costs, items, np.column_stack([pi, pj]))
    D = difference_design(pi, pj, N)
    X = D @ blk.B                              # x_ij = B^T (e_i - e_j), one row per pair
    w = expit(D @ blk.s)
    w = w * (1 - w)
    if objective == "D":
        label = "log det K (calibration block)"
    else:
        if objective == "contrast":
            a, b = resolve_contrast(items, blk.s, target)
            ta, tb = np.array([items.index(a)]), np.array([items.index(b)])
            label = f"Var({a} - {b})"
        else:
            o = np.argsort(-blk.s, kind="stable")
            ta, tb = np.repeat(o[:k], N - k), np.tile(o[k:], k)
            label = f"top-{k} boundary: sum w Var(contrast)"
        G = difference_design(ta, tb, N).toarray()
        omega = np.ones(1)
        if objective == "ranking":  # each contrast weighted by its misordering probability
            C = blk.other + blk.B @ blk.K @ blk.B.T
            se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", G, C, G), 1e-300))
            omega = ndtr(-np.abs(G @ blk.s) / se)
        H = G @ blk.B  # the contrasts in calibration coordinates
    K = blk.K.copy()

    def value(K: np.ndarray) -> float:
        if objective == "D":
            eig = np.linalg.eigvalsh(K)
            return float(np.sum(np.log(eig[eig > 1e-12 * eig.max()])))
        return float(omega @ (np.einsum("ij,jk,ik->i", G, blk.other, G) + np.einsum("ij,jk,ik->i", H, K, H)))

    before = value(K)
    counts = np.zeros(pi.size, int)
    gain = np.zeros(pi.size)
    first = np.full(pi.size, -1)
    for step in range(int(n)):
        KX = X @ K                              # rows K x_ij
        q = np.einsum("ij,ij->i", KX, X)        # x^T K x
        denom = 1.0 + w * q
        red = np.log(denom) if objective == "D" else w * ((H @ KX.T) ** 2 * omega[:, None]).sum(0) / denom
        t = int(np.argmax(red / cost))
        if red[t] <= 0:
            break
        K = K - w[t] * np.outer(KX[t], KX[t]) / denom[t]
        counts[t] += 1
        gain[t] += red[t]
        if first[t] < 0:
            first[t] = step
    m = counts > 0
    it = np.asarray(items, dtype=object)
    out = pd.DataFrame({"item_a": it[pi[m]], "item_b": it[pj[m]], "n": counts[m], "variance_reduction": gain[m],
                        "cost": counts[m] * cost[m], "first_step": first[m]})
    out = out.sort_values(["n", "first_step"], ascending=[False, True]).reset_index(drop=True)
    out.attrs.update(objective=objective, target=label, before=before, after=value(K))
    return out
