"""The graph and linear-program scans of a comparison design, for :func:`pydial.check_design`.

The cycle criterion of ident-LLM, connected components, and the separation checks of a judge's order-effect BTL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import breadth_first_order, connected_components

__all__ = ["CycleScan", "scan_cycles", "scan_cycles_fast", "SCAN_VECTOR_MIN", "undirected_labels", "names_text",
           "components_text", "no_separation_by_graph", "win_graph", "check_separation", "order_separation", "SEPARATION_TOL"]

SEPARATION_TOL = 1e-9
"""A separating direction is declared when the LP optimum exceeds this value."""
_ETA_TOL = 1e-7


def names_text(items: Sequence[str], idx: Sequence[int] | np.ndarray, limit: int = 6) -> str:
    """Return the names of ``items`` at ``idx``, the first ``limit`` of them and a count of the rest."""
    idx = list(idx)
    shown = ", ".join(str(items[k]) for k in idx[:limit])
    return shown + (f", ... ({len(idx)} in all)" if len(idx) > limit else "")


def components_text(items: Sequence[str], labels: np.ndarray, what: str) -> str:
    """Describe a disconnected graph: the largest component and the rest."""
    n_comp = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=n_comp)
    big = int(np.argmax(sizes))
    rest = np.flatnonzero(labels != big)
    groups = [np.flatnonzero(labels == c) for c in range(n_comp) if c != big]
    shown = "; ".join("{" + names_text(items, g, 4) + "}" for g in groups[:4])
    more = f"; ... ({len(groups)} groups)" if len(groups) > 4 else ""
    return (f"{what} has {n_comp} components (item(s) {names_text(items, rest)} not connected to the "
            f"{sizes[big]} items of the largest one; separate groups: {shown}{more})")


@dataclass(frozen=True)
class CycleScan:
    """Result of one weighted union-find pass over a judge's cells."""

    labels: np.ndarray  # component label of every item
    n_components: int
    cycle: list[int] | None  # items i -> ... -> j -> i of a cycle with nonzero signed order sum
    cycle_sum: int  # its signed order sum (0 when no such cycle)
    two_orders: bool  # the witness is a pair shown in both orders


def scan_cycles(N: int, ii: np.ndarray, jj: np.ndarray, aa: np.ndarray) -> CycleScan:
    """One weighted union-find pass over the cells ``(i_t, j_t, a_t)`` (Cor. cycle-criterion).

    Potentials ``x_i - x_j = a`` on a spanning forest; the first cell that breaks them closes a cycle with
    nonzero signed order sum (``z`` is in ``col(D)`` iff none does).
    """
    parent = list(range(N))
    size = [1] * N
    off = [0] * N  # x_v - x_parent(v)
    edges: list[tuple[int, int]] = []  # the spanning forest
    witness: tuple[int, int, int] | None = None

    def find(v: int) -> tuple[int, int]:
        path = []
        while parent[v] != v:
            path.append(v)
            v = parent[v]
        acc = 0
        for u in reversed(path):  # nearest to the root first
            acc += off[u]
            off[u] = acc
            parent[u] = v
        return v, (off[path[0]] if path else 0)

    for i, j, a in zip(ii.tolist(), jj.tolist(), aa.tolist()):
        ri, oi = find(i)
        rj, oj = find(j)
        if ri == rj:
            if witness is None and oi - oj != a:
                witness = (i, j, oi - oj - a)
            continue
        d = oi - oj - a  # x_rj - x_ri once joined so that x_i - x_j = a
        if size[ri] >= size[rj]:
            parent[rj], off[rj] = ri, d
            size[ri] += size[rj]
        else:
            parent[ri], off[ri] = rj, -d
            size[rj] += size[ri]
        edges.append((i, j))

    roots = [find(v)[0] for v in range(N)]
    _, labels = np.unique(np.asarray(roots), return_inverse=True)
    labels = labels.astype(np.int64)
    if witness is None:
        return CycleScan(labels, int(np.max(labels)) + 1, None, 0, False)
    i, j, total = witness
    cycle = _tree_path(N, np.array(edges), i, j)
    return CycleScan(labels, int(np.max(labels)) + 1, cycle, total, len(cycle) == 2)


SCAN_VECTOR_MIN = 2000  # judges with more cells are scanned by the vectorized potentials


def _in_both(keys: np.ndarray, first: np.ndarray, second: np.ndarray, size: int) -> np.ndarray:
    """Which of the integer ``keys`` (``0..size-1``) occur among both ``first`` and ``second`` (boolean tables, else sorting)."""
    if size > 16 * keys.size + 1_000_000:
        return np.isin(keys, np.intersect1d(first, second))
    out = np.zeros(size, bool)
    out[first] = True
    mark = np.zeros(size, bool)
    mark[second] = True
    out &= mark
    return out[keys]


def scan_cycles_fast(N: int, ii: np.ndarray, jj: np.ndarray, aa: np.ndarray) -> CycleScan:
    """:func:`scan_cycles` by array operations, for judges with many cells (same decisions, maybe another witness).

    A pair in both orders is a witness at once; else potentials are propagated along a breadth-first forest.
    """
    n_comp, labels = undirected_labels(N, ii, jj)
    labels = labels.astype(np.int64)
    key = ii.astype(np.int64) * N + jj
    both = _in_both(key, key[aa > 0], key[aa < 0], N * N)
    if both.any():
        t = int(np.flatnonzero(both)[0])
        return CycleScan(labels, n_comp, [int(ii[t]), int(jj[t])], 2, True)
    first = np.unique(key, return_index=True)[1]
    ui, uj, ua = ii[first], jj[first], aa[first].astype(float)
    G = sparse.csr_matrix((np.concatenate([ua, -ua]), (np.concatenate([ui, uj]), np.concatenate([uj, ui]))), shape=(N, N))
    x = np.zeros(N)
    pred = np.full(N, -9999)
    for root in np.unique(labels, return_index=True)[1]:  # the first item of every component
        order, pr = breadth_first_order(G, root, directed=False, return_predecessors=True)
        pred[order] = pr[order]
        for v in order[1:]:  # x_v = x_u - a(u -> v) along the tree edge u -> v
            u = pr[v]
            x[v] = x[u] - G[u, v]
    bad = np.flatnonzero(x[ii] - x[jj] != aa)
    if not bad.size:
        return CycleScan(labels, n_comp, None, 0, False)
    t = int(bad[0])
    i, j = int(ii[t]), int(jj[t])
    child = np.flatnonzero(pred >= 0)
    cycle = _tree_path(N, np.column_stack([child, pred[child]]), i, j)  # the forest's path closes the cycle with cell t
    return CycleScan(labels, n_comp, cycle, int(round(x[i] - x[j] - aa[t])), len(cycle) == 2)


def _tree_path(N: int, edges: np.ndarray, start: int, goal: int) -> list[int]:
    """Items on the path from ``start`` to ``goal`` in the forest of ``edges`` (rows ``(u, v)``) on ``N`` items."""
    T = sparse.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(N, N))
    pred = breadth_first_order(T, start, directed=False, return_predecessors=True)[1]
    path = [goal]
    while path[-1] != start:
        path.append(int(pred[path[-1]]))
    return path[::-1]


def undirected_labels(N: int, ii: np.ndarray, jj: np.ndarray) -> tuple[int, np.ndarray]:
    """Label the connected components of the comparison graph on ``N`` items with edges ``(ii, jj)``: count and item labels."""
    g = sparse.coo_matrix((np.ones(ii.size), (ii, jj)), shape=(N, N))
    n, labels = connected_components(g, directed=False)
    return int(n), labels


def no_separation_by_graph(N: int, ii: np.ndarray, jj: np.ndarray, aa: np.ndarray, n: np.ndarray,
                            y: np.ndarray, nopos: bool) -> bool:
    """Decide a sufficient condition for no separation on graphs; ``False`` means undecided (the LP decides).

    The order coordinate is forced to ``c = 0`` by a pair with both outcomes in both orders, or by the first-
    and the second-shown items each winning in both orders of a pair; then a strongly connected win graph
    forces every ``eta = 0``.
    """
    key = ii.astype(np.int64) * N + jj
    if not nopos:
        iw, jw = y > 0, y < n
        pos, neg = aa > 0, aa < 0
        both = iw & jw
        def meet(x: np.ndarray, z: np.ndarray) -> bool:  # a pair among the cells x and among the cells z
            return bool(_in_both(key, key[x], key[z], N * N).any())

        # c = 0 forced: both outcomes in both orders, or c >= |d| and c <= -|d|
        if not (meet(both & pos, both & neg) or (meet(iw & pos, jw & neg) and meet(jw & pos, iw & neg))):
            return False
    return win_graph(N, ii, jj, n, y)[0] == 1


def win_graph(N: int, ii: np.ndarray, jj: np.ndarray, n: np.ndarray, y: np.ndarray
              ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Strong components of the directed win graph (``i -> j`` when ``i`` beat ``j`` once): count, labels, edges."""
    iw, jw = y > 0, y < n
    src = np.concatenate([ii[iw], jj[jw]])
    dst = np.concatenate([jj[iw], ii[jw]])
    g = sparse.coo_matrix((np.ones(src.size), (src, dst)), shape=(N, N))
    n_comp, labels = connected_components(g, directed=True, connection="strong")
    return int(n_comp), labels, src, dst


def check_separation(items: Sequence[str], ii: np.ndarray, jj: np.ndarray, aa: np.ndarray,
                      n: np.ndarray, y: np.ndarray, nopos: bool) -> tuple[bool, str]:
    """Quasi-complete separation of a judge's order-effect BTL (Albert & Anderson 1984), by a linear program.

    ``max sum_t sign_t eta_t`` over ``|delta|, |c| <= 1`` with ``sign_t eta_t >= 0`` on one-sided cells and
    ``eta_t = 0`` on the others, ``eta_t = delta_i - delta_j + a_t c``: a positive optimum means no finite MLE.
    """
    N = len(items)
    m = ii.size
    sign = np.where(y >= n, 1.0, np.where(y <= 0, -1.0, 0.0))
    boundary = sign != 0
    if not boundary.any():
        return True, f"finite MLE exists: every one of the {m} cells has both outcomes"
    finite = f"finite MLE exists: no separating direction among the {int(boundary.sum())} cells with a one-sided outcome (of {m})"
    if no_separation_by_graph(N, ii, jj, aa, n, y, nopos):
        return True, finite
    from scipy.optimize import linprog  # a fifth of a second to import: only where the graph test does not decide

    rows = np.repeat(np.arange(m), 3)
    cols = np.column_stack([ii, jj, np.full(m, N)]).ravel()
    vals = np.column_stack([np.ones(m), -np.ones(m), aa.astype(float)]).ravel()
    E = sparse.csr_matrix((vals, (rows, cols)), shape=(m, N + 1))  # eta = E @ (delta, c)
    obj = -(E.T @ sign)
    A_ub = -(sparse.diags(sign[boundary]) @ E[boundary])
    bounds = [(-1.0, 1.0)] * N + [(0.0, 0.0) if nopos else (-1.0, 1.0)]
    res = linprog(obj, A_ub=A_ub, b_ub=np.zeros(int(boundary.sum())), A_eq=E[~boundary], b_eq=np.zeros(m - int(boundary.sum())),
                  bounds=bounds, method="highs")
    if res.status != 0:  # the LP is always feasible (0) and bounded; be explicit anyway
        return False, f"separation check failed to solve the linear program ({res.message})"
    if -res.fun <= SEPARATION_TOL:
        return True, finite
    hit = np.flatnonzero(np.abs(E @ res.x) > _ETA_TOL)
    examples = []
    for t in hit[:3]:
        i, j = int(ii[t]), int(jj[t])
        win, lose = (i, j) if sign[t] > 0 else (j, i)
        first = items[i] if aa[t] > 0 else items[j]
        examples.append(f"{items[win]} beats {items[lose]} in all {int(n[t])} ({first} shown first)")
    order = ""
    if not nopos and abs(res.x[N]) > _ETA_TOL:
        side = "first" if res.x[N] > 0 else "second"
        order = f"; the direction moves b_k towards {'+' if res.x[N] > 0 else '-'}inf (the {side}-shown item keeps winning)"
    return False, (f"quasi-complete separation: no finite MLE; {hit.size} of {m} cells are predicted perfectly "
                   f"along a separating direction, e.g. {'; '.join(examples)}{order}")


def order_separation(n: np.ndarray, y: np.ndarray, aa: np.ndarray) -> str | None:
    """``"first"`` / ``"second"`` when the judge's first- (second-) shown item won every decisive judgment, else None.

    Then ``b_k -> +-inf`` predicts every cell: no finite MLE of ``b_k`` under any score structure.
    """
    if n.size == 0:
        return None
    first_wins = np.where(aa > 0, y, n - y)
    if np.all(first_wins >= n):
        return "first"
    if np.all(first_wins <= 0):
        return "second"
    return None

