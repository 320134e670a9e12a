"""Identifiability checks of a comparison design, before any fit (:func:`check_design`).

Per judge ``k``: ident-LLM ``rank([D_k, z_k]) = N``, ident-lowrank ``rank([D_k W, z_k]) = r + 2``, separation,
covariates and self-preference; judge-wide the parameter count and sufficient subset; human ``rank(D_H M) = d``
and the finite BTL MLE.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from pydial.cache import derived
from pydial.data.cells import LLMCells
from pydial.data.comparisons import SELF_PREFERENCE, Comparisons, require_comparisons
from pydial.exceptions import ArgumentError, ArgumentTypeError, IdentifiabilityError
from pydial.model.chart import CALIBRATIONS, difference_design, fixed_effects
from pydial.model.design_graphs import (SCAN_VECTOR_MIN, CycleScan, check_separation, components_text, names_text,
                                        order_separation, scan_cycles, scan_cycles_fast, undirected_labels, win_graph)
from pydial.model.methods import ESTIMATORS, LLM_ONLY, USES_RANK
from pydial.model.penalty import check_penalty
from pydial.resources import check_choice, check_count, check_seed

__all__ = ["CALIBRATIONS", "CONDITIONS", "METHODS", "DesignReport", "check_design"]

METHODS: tuple[str | None, ...] = (*ESTIMATORS, None)
"""Allowed ``method`` values of :func:`check_design` (``None``: the DIAL checks)."""

CONDITIONS: tuple[str, ...] = ("ident-LLM", "ident-lowrank", "separation", "parameter-count", "sufficient-subset",
                               "pooled-connected", "human-design", "human-mle", "human-connected", "covariates",
                               "self-preference")
"""Public condition names, in the order they appear in :attr:`DesignReport.table`."""

REFERENCES: dict[str, str] = {
    "ident-LLM": "identification of the judge's position-debiased scores and order effect: rank([D_k, z_k]) = N, "
                 "by the cycle criterion",
    "ident-lowrank": "identification under the low-rank structure with col(W) known: rank([D_k W, z_k]) = r + 2",
    "separation": "finite MLE of the judge's order-effect Bradley-Terry model; Albert & Anderson 1984",
    "parameter-count": "identification under the low-rank structure: necessary parameter count",
    "sufficient-subset": "identification under the low-rank structure: sufficient judge subset, else full generic rank "
                         "of the model Jacobian",
    "pooled-connected": "pooled LLM comparison graph",
    "human-design": "human comparison design: rank(D_H M) = d",
    "human-mle": "finite human BTL MLE; Ford 1957",
    "human-connected": "finite Firth estimate of the human BTL (penalty='firth'); Kosmidis & Firth 2021",
    "covariates": "response covariates outside the span of the item-difference and order columns: rank [D, a, Z]",
    "self-preference": "identification under the low-rank structure, extended by the covariate effects: full generic "
                       "rank of the Jacobian in (S, b, beta)",
}
"""What each condition is and where it comes from (the paper's results or the literature)."""

ALL_JUDGES = "all judges"
HUMAN = "human"


@dataclass(frozen=True)
class DesignReport:
    """Outcome of :func:`check_design`.

    Attributes
    ----------
    ok : bool
        ``True`` when ``problems`` is empty, i.e. the design allows the requested fit.
    table : pandas.DataFrame
        Every check that was run, with columns ``judge`` (an LLM judge name,
        ``"human"`` or ``"all judges"``), ``condition`` (one of :data:`CONDITIONS`),
        ``ok`` (bool) and ``detail`` (a sentence saying why).
    problems : pandas.DataFrame
        The failures that rule out the requested fit (columns ``judge``, ``condition``,
        ``detail``), which depend on ``method`` (see :func:`check_design`).
    method : str or None
        The method the design was checked for.
    rank : int
        The rank ``r`` of the judge disagreement structure.
    calibration : str
        ``"mu"`` or ``"W"``.
    """

    ok: bool
    table: pd.DataFrame
    problems: pd.DataFrame
    method: str | None = None
    rank: int = 1
    calibration: str = "mu"

    def _title(self) -> str:
        n = len(self.problems)
        state = "ok" if self.ok else f"{n} problem{'s' if n != 1 else ''}"
        return f"DesignReport(method={self.method!r}, rank={self.rank}, calibration={self.calibration!r}): {state}"

    def raise_if_failed(self) -> None:
        """Raise :class:`~pydial.IdentifiabilityError` when the design fails.

        The message names the first failing condition, every judge that fails it
        and its detail, then lists the other failing conditions.

        Raises
        ------
        IdentifiabilityError
            If ``problems`` is not empty.
        """
        if self.ok:
            return
        p = self.problems
        fails = [(str(c), ", ".join(repr(str(j)) for j in g["judge"])) for c, g in p.groupby("condition", sort=False)]
        (cond, who), others = fails[0], fails[1:]
        msg = (f"the design cannot identify method={self.method!r} (rank={self.rank}, calibration={self.calibration!r}): "
               f"{cond} ({REFERENCES[cond]}) fails for {who}: {p['detail'].iloc[0]}")
        if others:
            msg += "; also failing: " + "; ".join(f"{c} for {w}" for c, w in others)
        msg += ". See check_design(...).table for every check."
        raise IdentifiabilityError(msg)

    def __repr__(self) -> str:
        """Show the title and the table of checks."""
        body = self.table.to_string(index=False, max_colwidth=100) if len(self.table) else "(no checks)"
        return f"{self._title()}\n{body}"

    def _repr_html_(self) -> str:
        failed = ' style="color:#b00020"'
        rows = [f"<tr{'' if rec.ok else failed}><td>{html.escape(str(rec.judge))}</td><td>{html.escape(rec.condition)}</td>"
                f"<td>{'yes' if rec.ok else 'NO'}</td><td style=\"text-align:left\">{html.escape(rec.detail)}</td></tr>"
                for rec in self.table.itertuples(index=False)]
        return (f"<p><b>{html.escape(self._title())}</b></p>"
                "<table><thead><tr><th>judge</th><th>condition</th><th>ok</th><th>detail</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>")


# ------------------------------------------------------------------- single checks
def _check_ident_llm(items: Sequence[str], scan: CycleScan, nopos: bool) -> tuple[bool, str]:
    """Prop. ident-LLM (Cor. cycle-criterion): ``G_k`` connected and, unless ``nopos``, a cycle with nonzero order sum."""
    N = len(items)
    parts = [] if scan.n_components == 1 else [components_text(items, scan.labels, "comparison graph")]
    if nopos:
        tail = " (b_k fixed at 0, so only connectivity is needed)"
        return (False, parts[0] + tail) if parts else (True, f"comparison graph connected over all {N} items{tail}")
    if scan.cycle is None:
        parts.append("every cycle has zero signed order sum: b_k is confounded with the item scores "
                     "(z_k lies in col(D_k)); show some pair in both orders or vary the order around a cycle")
    if parts or scan.cycle is None:  # no cycle: ``parts`` says so
        return False, "; ".join(parts)
    names = [str(items[k]) for k in scan.cycle]
    where = (f"pair ({names[0]}, {names[1]}) is shown in both orders (a length-two cycle)" if scan.two_orders
             else "cycle " + " -> ".join(names + [names[0]]))
    return True, f"comparison graph connected over all {N} items; {where} has signed order sum {abs(scan.cycle_sum)} != 0"


def _check_lowrank(W: np.ndarray, ii: np.ndarray, jj: np.ndarray, aa: np.ndarray, r: int,
                   nopos: bool, basis_note: str, z: np.ndarray | None = None) -> tuple[bool, str]:
    """Prop. ident-lowrank, ``col(W)`` known: ``rank([D_k W, z_k]) = r + 2`` (``r + 1`` if ``nopos``), ``+ p_k`` with ``z``."""
    X = np.column_stack([W[ii] - W[jj]] + ([] if nopos else [aa.astype(float)[:, None]])
                        + ([] if z is None else [np.asarray(z, float)]))
    need = r + 1 + (0 if nopos else 1) + (0 if z is None else z.shape[1])
    rk = int(np.linalg.matrix_rank(X)) if X.size else 0
    ok = rk == need
    if z is not None:
        label = "rank([D_k W, Z_k])" if nopos else "rank([D_k W, a_k, Z_k])"
        text = f"{label} = {rk} {'=' if ok else '<'} {need} {basis_note}"
        return ok, text if ok else text + (
            "; the judge's own-item indicator o_k (the self-preference column D_k o_k) lies in the span of its "
            "scores' directions D_k W and the other columns: its self-preference is not identified even with col(W) known")
    label, tail = ("rank(D_k W)", " (b_k fixed at 0)") if nopos else ("rank([D_k W, z_k])", "")
    text = f"{label} = {rk} {'=' if ok else '<'} {'r+1' if nopos else 'r+2'} = {need} {basis_note}{tail}"
    return ok, text if ok else text + f"; the judge is not identified through the shared rank-{r} space"


def _check_self_preference(data: Comparisons, r: int, nopos: bool, shared: bool,
                           bad: list[str], rng: np.random.Generator) -> tuple[bool, str]:
    """Check the Jacobian rank in ``(S, b, beta)``, naming confounded effects (too large: the failing judges ``bad``)."""
    N, K, p = data.N, data.K, data.p
    fixed = fixed_effects(data, shared, False)
    free = (np.ones((1 if shared else K) * p, bool) if fixed is None else ~np.asarray(fixed, bool)).reshape(-1, p)
    P = (K + N) * (r + 1) + K + int(free.sum())
    if P > JACOBIAN_MAX_PARAMS:
        return not bad, (f"the Jacobian in (S, b, beta) has {P} parameters (more than {JACOBIAN_MAX_PARAMS}) and was not "
                         "formed; the per-judge condition with col(W) known decides: "
                         + (f"fails for {bad}" if bad else "holds for every mapped judge"))
    rk, need, confounded = _lowrank_jacobian_rank(N, K, r, data.llm, nopos, rng, free)
    if rk >= need:
        return True, (f"the Jacobian of the rank-{r} LLM model in (S, b, beta) has full rank {rk} = (r+1)(K+N-r-2)"
                      f"{'' if nopos else '+K'} + {int(free.sum())} free covariate effects at a generic point: every "
                      "self-preference effect is locally identified through the shared low-rank structure")
    labels = ["LLM judges (shared)"] if shared else list(data.judges)
    hit = [f"{labels[g]}:{data.covariates[t]}" for (g, t), c in zip(np.argwhere(free), confounded) if c]
    return False, (f"the Jacobian of the rank-{r} LLM model in (S, b, beta) has rank {rk} < {need} at a generic point: "
                   f"the covariate effect(s) {hit} are confounded with the judges' scores (a judge's self-preference "
                   "beta_k o_k is absorbed by its scores when o_k lies in its score space, e.g. rank r = K - 1 leaves "
                   "every judge's scores free); lower the rank, add judges that pin down the item space, or drop "
                   "self_preference=")


def _check_covariates(N: int, ii: np.ndarray, jj: np.ndarray, aa: np.ndarray | None, z: np.ndarray,
                      names: Sequence[str]) -> tuple[bool, str]:
    """Whether ``rank [D, a, Z] = rank [D, a] + p``: each covariate added in turn, those adding no rank named."""
    cols = [difference_design(ii, jj, N)] + ([sparse.csr_matrix(np.asarray(aa, float)[:, None])] if aa is not None else [])
    cols.append(sparse.csr_matrix(np.asarray(z, float)))
    X = sparse.hstack(cols, format="csr")
    G = np.asarray((X.T @ X).toarray())  # (N [+1] + p) square: the rank of X from its Gram matrix
    G /= max(float(np.abs(G).max()), 1e-300)
    width = N + (aa is not None)

    def rank(idx: list[int]) -> int:
        ev = np.linalg.eigvalsh(G[np.ix_(idx, idx)])
        return int(np.sum(ev > 1e-10 * max(float(ev[-1]), 1e-300)))

    keep = list(range(width))
    r0 = rank(keep)
    bad = []
    for t, name in enumerate(names):
        trial = keep + [width + t]
        r1 = rank(trial)
        if r1 == r0:
            bad.append(name)
        else:
            keep, r0 = trial, r1
    if bad:
        what = "item-difference and order columns" if aa is not None else "item-difference columns"
        return False, (f"covariate(s) {bad} lie in the span of the {what} (and the covariates before them) on these "
                       "comparisons: their effects are confounded with the scores; drop them or add comparisons "
                       "where they vary within a pair")
    return True, f"rank [D, {'a, ' if aa is not None else ''}Z] adds {len(names)}: every covariate identified"


def check_human_mle(items: Sequence[str], data: Comparisons) -> tuple[bool, str]:
    """Whether the human BTL MLE is finite (the directed win graph strongly connected; Ford 1957), with the reason."""
    N = len(items)
    h = data.human
    if len(h) == 0:
        return False, "no human comparisons: the human BTL MLE does not exist"
    n_comp, lab, src, dst = win_graph(N, h.i, h.j, h.n, h.y)
    if n_comp == 1:
        return True, f"directed win graph strongly connected over all {N} items"
    compared = np.bincount(np.concatenate([h.i, h.j]), minlength=N) > 0
    cross = lab[src] != lab[dst]
    has_out = np.bincount(lab[src[cross]], minlength=n_comp) > 0
    has_in = np.bincount(lab[dst[cross]], minlength=n_comp) > 0
    never = np.flatnonzero(~compared)
    parts = [f"never compared by humans: {names_text(items, never)}"] if never.size else []
    losers, winners = [], []
    for c in range(n_comp):
        members = np.flatnonzero(lab == c)
        if not compared[members].any():
            continue
        grp = "{" + names_text(items, members, 4) + "}"
        if not has_out[c] and has_in[c]:
            losers.append(f"{items[members[0]]} only loses" if members.size == 1
                          else f"{grp} never beat an item outside the group")
        elif has_out[c] and not has_in[c]:
            winners.append(f"{items[members[0]]} never loses" if members.size == 1
                           else f"{grp} never lost to an item outside the group")
        elif not has_out[c] and not has_in[c]:
            parts.append(f"{grp} compared only among themselves")
    parts = losers[:4] + winners[:4] + parts
    return False, (f"directed win graph has {n_comp} strongly connected components, so the unrestricted human "
                   f"BTL MLE is infinite or not unique: " + "; ".join(parts))


def _check_human_design(data: Comparisons, d: int, M: np.ndarray | None, what: str) -> tuple[bool, str]:
    """Cond. human-design ``rank(D_H M) = d``; for a generic ``M`` ``min(d, rank(D_H)) = d``, ``rank(D_H) = N - C_H``."""
    N, h = data.N, data.human
    if len(h) == 0:
        return False, f"no human comparisons: rank(D_H M) = 0 < d = {d} ({what})"
    n_comp, _ = undirected_labels(N, h.i, h.j)
    rank_dh = N - n_comp
    if M is None:
        rk = min(d, rank_dh)
        how = f"for a generic M ({what}); rank(D_H) = N - {n_comp} components = {rank_dh}"
    else:
        rk = int(np.linalg.matrix_rank(M[h.i] - M[h.j]))
        how = f"with the given M ({what}); rank(D_H) = {rank_dh}"
    if rk == d:
        return True, f"rank(D_H M) = {rk} = d {how}"
    hint = f"; the {len(h)} human pair(s) distinguish only {rank_dh} direction(s)" if rank_dh < d else ""
    return False, f"rank(D_H M) = {rk} < d = {d} {how}{hint}: c_H is not identified"


JACOBIAN_MAX_PARAMS = 4000
"""Largest parameter count for which :func:`_lowrank_jacobian_rank` is computed."""


def _lowrank_jacobian_rank(N: int, K: int, r: int, L: LLMCells, nopos: bool, rng: np.random.Generator,
                           free: np.ndarray | None = None) -> tuple[int, int, np.ndarray]:
    r"""Return the generic rank of the Jacobian of the structured LLM model's cell predictors, and the rank needed.

    ``eta_t = a_k^T (B_i - B_j) + z_t b_k (+ z_t' beta_k)``: with the ``(r+1)^2 + (r+1)`` invariances the
    rank is at most ``(r+1)(K+N-r-2) + K`` (``- K`` for ``nopos``) plus the ``free`` entries of ``beta``, and
    ``(S, b, beta)`` is locally identified at generic values iff a random point attains it (constant-rank
    theorem).  Returns ``(rank, needed, confounded)``: the best of two points, and the free ``beta`` entries
    moved by the null space.  ``free``: the free entries of ``beta``, one row per judge or one shared row.
    """
    q = r + 1
    judge, ii, jj, aa, z = L.judge, L.i, L.j, L.a, L.z
    m = ii.size
    P = K * q + N * q + (0 if nopos else K)
    need = q * (K + N - r - 2) + (0 if nopos else K)
    zcols = None
    if z is not None and free is not None and free.any():
        # d eta_t / d beta_{g, l} = z_tl for the judge's row g: one column per free entry (g, l)
        index = np.full(free.shape, -1)
        index[free] = np.arange(int(free.sum()))
        col = index[judge % free.shape[0]]  # (m, p): the column of each cell's entry (g, l), -1 where fixed
        ok = (col >= 0) & (z != 0)
        zcols = sparse.csr_matrix((z[ok], (np.nonzero(ok)[0], col[ok])), shape=(m, int(free.sum())))  # sparse: m can be millions
        need += zcols.shape[1]
    best, confounded = 0, np.zeros(0 if zcols is None else zcols.shape[1], bool)
    for _ in range(2):
        A = rng.standard_normal((K, q))
        B = rng.standard_normal((N, q))
        dB = B[ii] - B[jj]  # d eta / d A_k
        Ak = A[judge]  # d eta / d B_i = +A_k, d eta / d B_j = -A_k
        rows = np.repeat(np.arange(m), 3 * q + (0 if nopos else 1))
        cols = [judge[:, None] * q + np.arange(q), K * q + ii[:, None] * q + np.arange(q),
                K * q + jj[:, None] * q + np.arange(q)]
        vals = [dB, Ak, -Ak]
        if not nopos:
            cols.append((K * q + N * q + judge)[:, None])
            vals.append(aa.astype(float)[:, None])
        J = sparse.csr_matrix((np.hstack(vals).ravel(), (rows, np.hstack(cols).ravel())), shape=(m, P))
        if zcols is None:
            ev = np.linalg.eigvalsh((J.T @ J).toarray())
            best = max(best, int(np.sum(ev > 1e-9 * max(float(ev.max(initial=0.0)), 1e-300))))
            continue
        J = sparse.hstack([J, zcols], format="csr")
        ev, vec = np.linalg.eigh((J.T @ J).toarray())
        null = ev <= 1e-9 * max(float(ev.max(initial=0.0)), 1e-300)
        if int(np.sum(~null)) > best or best == 0:
            best = int(np.sum(~null))
            # the gauge directions move A and B only (beta enters linearly): a null direction with a beta part is an effect
            confounded = np.linalg.norm(vec[P:, null], axis=1) > 1e-6
    return best, need, confounded


def check_design(data: Comparisons, *, rank: int = 1, calibration: str = "mu", method: str | None = None,
                 W: np.ndarray | None = None, seed: int | np.random.Generator = 0, penalty: str | None = None,
                 shared: bool = False) -> DesignReport:
    r"""Check every identification condition of the DIAL paper on a design.

    Parameters
    ----------
    data : Comparisons
        The comparison data (only which cells were observed and, for the MLE checks,
        which outcomes were one-sided matter).
    rank : int, default 1
        Rank ``r`` of the judge disagreement ``U V^T`` (``S = gamma mu^T + U V^T``).
    calibration : {"mu", "W"}, default "mu"
        Calibration basis ``M = mu`` (``d = 1``) or ``M = W`` (``d = r + 1``).
    method : {"judges", "human", "pooled", "dial-anc", "dial-ada", "dial-nopos", "atc"} or None
        The fit the design is checked for; it decides which failures are
        ``problems`` (see Notes).  ``None`` checks the DIAL requirements.
    W : array of shape (N, r + 1), optional
        The item basis ``W = [mu, V]`` of ident-lowrank and human-design (``M = W[:, :1]``
        for ``"mu"``); by default these are generic-rank checks (a random ``W`` with
        columns orthogonal to ``1``, and ``min(d, rank(D_H))``).
    seed : int, numpy.random.Generator or None, default 0
        Seed of the generic ``W`` (None: 0, so that the checks are the same on every run).
    penalty : {None, "firth"}
        ``"firth"``: Firth's estimate exists without a finite MLE, so separation (``judges``)
        and human-mle (``human``, ``atc``) do not block, and the human comparison graph
        must be connected instead (row ``human-connected``).
    shared : bool, default False
        One covariate effect shared by the LLM judges (``covariate_effects="shared"``):
        the rows of ``beta`` in the self-preference check.

    Returns
    -------
    DesignReport
        ``table`` with every check and ``problems`` with the ones that block the fit.

    Raises
    ------
    ArgumentTypeError
        ``data`` is not a :class:`~pydial.Comparisons` (e.g. the DataFrame it is read from).
    ArgumentError
        Unknown ``method``, ``calibration`` or ``penalty``, negative ``rank``, or ``W`` of the
        wrong shape; ``rank``, ``seed``, ``shared`` or ``W`` of the wrong type (:class:`~pydial.ArgumentTypeError`).

    Notes
    -----
    Which failing rows are ``problems``:

    * ``"judges"`` (one order-effect BTL per judge): ident-LLM and separation of every judge.
    * ``"human"`` (human-only BTL): human-mle; the LLM checks are not run (the table lists
      only the human conditions).
    * ``"pooled"``: pooled-connected and human-design with ``d = 1``.
    * ``"dial-anc"``, ``"dial-ada"``, ``"dial-nopos"``, ``"atc"`` and ``None``: a judge that
      fails both ident-LLM and ident-lowrank; parameter-count, sufficient-subset and
      human-design (for ``None`` only with human comparisons).  A judge whose first-shown (or
      second-shown) item won every decisive judgment is a separation problem for every method
      with order effects (``b_k`` has no finite MLE whatever the score structure).  ``"atc"``
      also needs human-mle (it aggregates the human comparisons by an unrestricted BTL fit).
    * With response covariates, a judge's (or the people's) ``covariates`` row, on the
      covariates not 0 on all its comparisons (the others' effects are fixed at 0).  The
      self-preference covariate is left out of a judge's row except for ``"judges"``, where it
      always fails (``z = D_k o_k`` lies in ``col(D_k)``); the structured methods check it in
      the ``"self-preference"`` rows: the ``"all judges"`` row (the Jacobian of
      :func:`_lowrank_jacobian_rank` with the free covariate effects) names the judges whose
      effect is confounded; the per-judge rows (``rank([D_k W, a_k, Z_k]) = r + 2 + p_k``)
      decide when the Jacobian is too large to form.  ``"pooled"`` checks its one shared
      effect over the pooled cells (``"all judges"``, ``covariates``).

    For ``"dial-nopos"`` (``b = 0``) ident-LLM reduces to connectivity of ``G_k``,
    ident-lowrank to ``rank(D_k W) = r + 1``, the parameter count drops the ``K`` order
    effects and separation has ``c = 0``.

    Examples
    --------
    >>> import pandas as pd, pydial
    >>> from pydial.model.identifiability import check_design
    >>> df = pd.DataFrame({"record_id": [1, 2], "judge": ["g", "g"], "item_a": ["x", "y"],
    ...                    "item_b": ["y", "x"], "first": ["a", "a"], "winner": ["a", "b"]})
    >>> rep = check_design(pydial.Comparisons.from_frame(df), rank=0, method="judges")
    >>> bool(rep.table.loc[rep.table.condition == "ident-LLM", "ok"].iloc[0])
    True
    """
    data = require_comparisons(data)
    check_choice("method", method, METHODS)
    check_choice("calibration", calibration, CALIBRATIONS)
    r = check_count(rank, "rank", minimum=0)
    check_penalty(penalty)
    seed = 0 if seed is None else check_seed(seed, generator=True)
    if not isinstance(shared, (bool, np.bool_)):
        raise ArgumentTypeError(f"shared must be True or False, got {shared!r}")
    N = data.N
    if W is not None:
        try:
            W = np.asarray(W, dtype=float)
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"W must be a numeric array of shape (N, rank+1) = ({N}, {r + 1}), got "
                                    f"{type(W).__name__}") from None
        if W.shape != (N, r + 1) or not np.all(np.isfinite(W)):
            raise ArgumentError(f"W must be a finite array of shape (N, rank+1) = ({N}, {r + 1}), got shape {W.shape}")
        Wk, generic_note = W, "with the given W"
    else:
        Wk = np.random.default_rng(seed).standard_normal((N, r + 1))
        Wk -= Wk.mean(axis=0)  # columns orthogonal to 1, orthonormal (scaled by sqrt(N)) when r + 1 <= N - 1
        if r + 1 <= N - 1:
            Wk = np.linalg.qr(Wk)[0] * np.sqrt(N)
        generic_note = "for a generic W (random, columns orthogonal to 1; a generic-rank check)"
    d = _Design(data, method, r, Wk, generic_note, penalty, seed, bool(shared))
    if method != "human":  # the LLM judges are neither reported nor required for the human BTL
        _structure_checks(d, _judge_checks(d))
        _pooled_and_self_checks(d)
    _human_checks(d, calibration, W)
    table = pd.DataFrame(d.rows, columns=["judge", "condition", "ok", "detail"]).astype({"ok": bool})
    prob = pd.DataFrame(d.problems, columns=["judge", "condition", "detail"])
    return DesignReport(ok=not d.problems, table=table, problems=prob, method=method, rank=r, calibration=calibration)


@dataclass
class _Design:
    """What the checks of one design share, and the rows and problems they add (:func:`check_design`)."""

    data: Comparisons
    method: str | None
    r: int
    W: np.ndarray  # the item basis checked: the given W or a generic one
    generic_note: str
    penalty: str | None
    seed: int | np.random.Generator
    shared: bool
    rows: list[tuple[str, str, bool, str]] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, who: str, cond: str, ok: bool, detail: str, blocks: bool = True) -> None:
        """Add a row of the table, and a problem when it fails and ``blocks`` the fit."""
        self.rows.append((who, cond, ok, detail))
        if blocks and not ok:
            self.problems.append((who, cond, detail))

    @property
    def nopos(self) -> bool:
        return self.method == "dial-nopos"

    @property
    def dial(self) -> bool:
        """Whether the structured model's conditions are required (the structured methods, and ``None``)."""
        return self.method is None or self.method in USES_RANK

    @property
    def names(self) -> np.ndarray:
        """The covariate names as an object array (boolean masks pick the checked ones)."""
        return np.asarray(self.data.covariates, dtype=object)


def _judge_checks(d: _Design) -> list[int]:
    """Per-judge checks (one union-find pass, one small rank, one small LP each); returns the identified judges."""
    data, r, N, nopos, L = d.data, d.r, d.data.N, d.nopos, d.data.llm
    support, names_arr = data.covariate_support, d.names
    is_self = names_arr == SELF_PREFERENCE  # left out of a judge's own covariate check but in "judges"
    own_check = ~is_self if d.method != "judges" else np.ones(data.p, bool)
    order = np.argsort(L.judge, kind="stable")
    bounds = np.searchsorted(L.judge[order], np.arange(data.K + 1))
    n_ident = []
    for k, name in enumerate(data.judges):
        sel = order[bounds[k]:bounds[k + 1]]
        ii, jj, aa, n, y = L.i[sel], L.j[sel], L.a[sel], L.n[sel], L.y[sel]
        scan = (scan_cycles_fast if sel.size > SCAN_VECTOR_MIN else scan_cycles)(N, ii, jj, aa)
        ok_llm, det_llm = _check_ident_llm(data.items, scan, nopos)
        ok_low, det_low = _check_lowrank(d.W, ii, jj, aa, r, nopos, d.generic_note)
        ok_sep, det_sep = check_separation(data.items, ii, jj, aa, n, y, nopos)
        side = None if nopos else order_separation(n, y, aa)
        if side is not None:
            det_sep = (f"the {side}-shown item won all {int(n.sum())} decisive judgments of this judge, so b_k -> "
                       f"{'+' if side == 'first' else '-'}inf: the judge's order-effect BTL has no finite MLE and b_k is "
                       f"not identified under any score structure (drop the judge, or fit dial-nopos); {det_sep}")
        if not ok_llm and not ok_sep:
            det_sep += " (ident-LLM fails as well, so the parameters would not be unique anyway)"
        d.rows += [(name, "ident-LLM", ok_llm, det_llm), (name, "ident-lowrank", ok_low, det_low),
                   (name, "separation", ok_sep, det_sep)]
        cols = support[k] & own_check  # the judge's estimated effects (the others are fixed at 0)
        if cols.any():
            assert L.z is not None  # data with covariates have them on every cell
            ok_cov, det_cov = _check_covariates(N, ii, jj, None if nopos else aa, L.z[sel][:, cols], list(names_arr[cols]))
            d.add(name, "covariates", ok_cov, det_cov)
        if d.dial and (support[k] & is_self).any():
            assert L.z is not None
            ok_sp, det_sp = _check_lowrank(d.W, ii, jj, aa, r, nopos, d.generic_note, L.z[sel][:, support[k]])
            d.add(name, "self-preference", ok_sp, det_sp, blocks=False)
        if ok_llm:
            n_ident.append(k)
        if d.method == "judges":
            if not ok_llm:
                d.problems.append((name, "ident-LLM", det_llm))
            if not ok_sep and d.penalty != "firth":
                d.problems.append((name, "separation", det_sep))
        elif d.dial and side is not None:
            d.problems.append((name, "separation", det_sep))
        elif d.dial and not ok_llm and not ok_low:
            d.problems.append((name, "ident-lowrank", f"identified neither on its own (ident-LLM: {det_llm}) nor through "
                               f"the shared rank-{r} space (ident-lowrank: {det_low})"))
    return n_ident


def _structure_checks(d: _Design, n_ident: list[int]) -> None:
    """Judge-wide conditions of Prop. ident-lowrank: the parameter count and the sufficient judge subset."""
    data, r, N, K, nopos, L = d.data, d.r, d.data.N, d.data.K, d.nopos, d.data.llm
    need = (r + 1) * (K + N - r - 2) + (0 if nopos else K)
    formula = "(r+1)(K+N-r-2)" + ("" if nopos else "+K")
    ok_pc = len(L) >= need
    det_pc = (f"sum_k m_k = {len(L)} {'>=' if ok_pc else '<'} {formula} = {need} free parameters of "
              + ("S (b fixed at 0)" if nopos else "(S, b)"))
    if not ok_pc:
        det_pc += f": too few (judge, pair, order) cells for the rank-{r} structure"
    d.add(ALL_JUDGES, "parameter-count", ok_pc, det_pc, blocks=d.dial)
    own = "connected comparison graphs (b fixed at 0)" if nopos else "identified scores (ident-LLM)"
    if K == 0:
        ok_ss, det_ss = False, "no LLM judges: the LLM representation cannot be estimated"
    elif r > K - 1:
        ok_ss, det_ss = False, f"rank r = {r} is too large: r <= K-1 = {K - 1} is needed (rank(U) = r with 1^T U = 0)"
    elif r + 1 > N - 1:
        ok_ss, det_ss = False, f"rank r = {r} is too large: r+1 <= N-1 = {N - 1} is needed (W orthogonal to 1)"
    elif len(n_ident) < r + 1:
        who = names_text(data.judges, n_ident) if n_ident else "none"
        subset = (f"{len(n_ident)} judge(s) with {own} ({who}) < r+1 = {r + 1}, too few for the sufficient judge "
                  "subset of the low-rank identification condition")
        P = (K + N) * (r + 1) + K
        if not ok_pc:
            ok_ss, det_ss = False, subset + "; the parameter count fails too"
        elif P > JACOBIAN_MAX_PARAMS:
            ok_ss, det_ss = False, subset + (f"; the exact generic-rank check has {P} parameters (more than "
                                             f"{JACOBIAN_MAX_PARAMS}) and was not run (fit with check=False / --no-check "
                                             "to try anyway)")
        else:
            rk, need_j, _ = _lowrank_jacobian_rank(N, K, r, L, nopos, np.random.default_rng(d.seed))
            ok_ss = rk >= need_j
            det_ss = subset + (f"; but the Jacobian of the rank-{r} LLM model has full rank {rk} = "
                               f"{formula} at a generic point, so (S, b) is locally "
                               "identified through the shared structure (generic-rank check)" if ok_ss else
                               f"; and the Jacobian of the rank-{r} LLM model has rank {rk} < {need_j} = "
                               f"{formula} at a generic point: {need_j - rk} direction(s) of "
                               "(S, b) change no cell probability, so the structured fit is not identified")
    else:
        ok_ss, det_ss = True, (f"{len(n_ident)} judge(s) with {own} ({names_text(data.judges, n_ident)}) >= r+1 = {r + 1}; "
                               f"r <= K-1 and r+1 <= N-1; rank(S_K0) = r+1 itself depends on the fitted scores")
    d.add(ALL_JUDGES, "sufficient-subset", ok_ss, det_ss, blocks=d.dial)


def _pooled_and_self_checks(d: _Design) -> None:
    """Check the joint self-preference of the structured methods, and the pooled covariates and connectivity."""
    data, N, L = d.data, d.data.N, d.data.llm
    own = [(who, ok) for who, cond, ok, _ in d.rows if cond == "self-preference"]  # the per-judge rows
    if d.dial and own:
        bad = [who for who, ok in own if not ok]
        ok_sj, det_sj = _check_self_preference(data, d.r, d.nopos, d.shared, bad, np.random.default_rng(d.seed))
        d.add(ALL_JUDGES, "self-preference", ok_sj, det_sj)
    if d.method != "pooled":
        return
    if data.p:  # one effect shared by the pooled judges: rank [D, Z_L] over the pooled cells
        assert L.z is not None
        cols = data.covariate_support[:-1].any(axis=0)
        ok_pc, det_pc = _check_covariates(N, L.i, L.j, None, L.z[:, cols], list(d.names[cols]))
        d.rows.append((ALL_JUDGES, "covariates", ok_pc, det_pc + " (the pooled cells, one effect shared by the judges)"))
        if not ok_pc:
            d.problems.append((ALL_JUDGES, "covariates", det_pc))
    n_comp, lab = undirected_labels(N, L.i, L.j)
    det_pl = (f"pooled LLM comparison graph connected over all {N} items" if n_comp == 1
              else components_text(data.items, lab, "pooled LLM comparison graph"))
    d.add(ALL_JUDGES, "pooled-connected", n_comp == 1, det_pl)


def _human_checks(d: _Design, calibration: str, W: np.ndarray | None) -> None:
    """Check the human conditions: the design ``rank(D_H M) = d``, the MLE, the covariates and (Firth) connectivity."""
    data, method, N, items, h = d.data, d.method, d.data.N, d.data.items, d.data.human
    q = 1 if (calibration == "mu" or method == "pooled") else d.r + 1
    what = "pooled score direction, d = 1" if method == "pooled" else f"calibration {calibration!r}, d = {q}"
    ok_hd, det_hd = _check_human_design(data, q, None if W is None else W[:, :q], what)
    d.rows.append((HUMAN, "human-design", ok_hd, det_hd))
    ok_hm, det_hm = check_human_mle(items, data)
    d.rows.append((HUMAN, "human-mle", ok_hm, det_hm))
    cols = data.covariate_support[-1]  # the people's estimated effects (e.g. no self-preference)
    if cols.any() and len(h) and method not in LLM_ONLY:
        assert h.z is not None
        d.add(HUMAN, "covariates", *_check_covariates(N, h.i, h.j, None, h.z[:, cols], list(d.names[cols])))
    if not ok_hd and (method == "pooled" or (d.dial and (method is not None or len(h) > 0))):
        d.problems.append((HUMAN, "human-design", det_hd))
    if d.penalty == "firth" and method in ("human", "atc"):
        n_comp, lab = undirected_labels(N, h.i, h.j)
        ok_hc = n_comp == 1 and len(h) > 0
        det_hc = (f"human comparison graph connected over all {N} items: Firth's estimate is finite" if ok_hc
                  else components_text(items, lab, "human comparison graph"))
        d.add(HUMAN, "human-connected", ok_hc, det_hc)
    elif not ok_hm and method in ("human", "atc"):
        d.problems.append((HUMAN, "human-mle", det_hm))


def design_report(data: Comparisons, rank: int, calibration: str, method: str, seed: int | None,
                  penalty: str | None, *, shared: bool = False) -> "DesignReport":
    """Return :func:`check_design` of one design, computed once per data set (the data are immutable)."""
    seed = 0 if seed is None else seed
    shared = bool(shared and data.p)
    return derived(data, ("check_design", rank, calibration, method, seed, penalty) + ((True,) if shared else ()),
                   lambda: check_design(data, rank=rank, calibration=calibration, method=method, seed=seed,
                                        penalty=penalty, shared=shared))
