r"""Sandwich influence of the fits of every outcome family (eq. weighted-empirical-sandwich) and GACV's trace (eq. gacv).

An :class:`Influence` ``u_c = A j_c`` is kept factored: ``j_c`` the derivatives of cell ``c``'s channels (``eta``, then
``log nu``), ``A`` the map of a parameter score to the targets.  The binary family is the one-channel case of every
function here: ``J = d eta / d phi`` kept factored (:class:`~pydial.model.cells.CellJacobian`), the cell residuals
``n p - y`` (:func:`cell_stats`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from pydial.cache import derived
from pydial.data.comparisons import COVARIATE_PREFIX, I_WINS, J_WINS, TIE, Comparisons
from pydial.data.ingest import RowCoder
from pydial.exceptions import ArgumentError
from pydial.inference.linearization import Linearization, two_step_maps
from pydial.inference.meats import BlockJacobian, CellStats, MeatSource, as_sparse, parameter_meat
from pydial.model.cells import CellJacobian
from pydial.model.chart import Chart, consensus_gamma, pull_terms, sparse_pull_back
from pydial.model.design import Design
from pydial.model.families import BINARY, Family
from pydial.model.glm import FamilyGLM
from pydial.model.likelihood import Cells, Objective
from pydial.optim import pinv_sym


def cell_stats(obj: Objective, x: np.ndarray, unit_weight: bool = False) -> CellStats:
    """Return the :class:`~pydial.inference.meats.CellStats` of ``obj``'s cells at ``x`` (``unit_weight``: weights 1).

    The per-cell score factors of the meats (eq. hac-meat, eq. cell-clustered-meat) and of GACV (eq. gacv): the binary
    family's wins ``y`` and fitted ``p`` (the cells' own arrays, no copy), the others' outcomes with the observed information.
    """
    c = obj.cells
    w = np.ones(c.w.size) if unit_weight else c.w
    eta = obj.eta(x[: obj.chart.dim])
    if obj.family.is_binary:
        return CellStats(c.n, w, c.is_human, c.y, expit(eta))
    P, a, b = obj.outcome_derivatives(x, eta)
    d = obj.cell_derivatives(x, eta)
    info = -np.column_stack([d.d_eta_eta, d.d_eta_l, d.d_l_l])
    return CellStats.outcomes(c.counts, P, a, b, w, c.is_human, pair_keys(c, obj.chart.N), info)


def pair_keys(cells: Cells, N: int) -> np.ndarray:
    """Judge-pair key ``(g N + i) N + j`` of every cell (the clusters of the cell meat)."""
    return (cells.g.astype(np.int64) * N + cells.i) * N + cells.j


def _judgments(data: Comparisons, people: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every judgment (``people``: the people's), sorted by cell key: ``(key, record, outcome)``; None without records."""
    f = data.frame
    if "rec" not in f.columns:
        return None
    pos = np.flatnonzero(f["k"].to_numpy() == data.K) if people else None
    f = f if pos is None else f.iloc[pos]
    used = ((~f["self"]) & f["outcome"].isin([I_WINS, J_WINS, TIE])).to_numpy()
    f, pos = f.loc[used], np.flatnonzero(used) if pos is None else pos[used]  # pos: their rows of data.frame
    N, k = data.N, f["k"].to_numpy(np.int64)
    a_row = np.where(k == data.K, 0, f["a"].to_numpy(np.int64))
    key = ((k * N + f["i"].to_numpy(np.int64)) * N + f["j"].to_numpy(np.int64)) * 3 + a_row + 1
    if data.p:
        rc = _z_codes(data)
        key = key * len(rc) + rc.codes[pos]
    oc = f["outcome"].to_numpy()
    order = np.argsort(key, kind="stable")
    outcome = np.select([oc == I_WINS, oc == J_WINS], [0, 1], 2).astype(np.int8)
    return key[order], f["rec"].to_numpy(np.int64)[order], outcome[order]


def _z_codes(data: Comparisons) -> RowCoder:
    """Return the codes of the covariate values of ``data``'s frame (:class:`~pydial.data.ingest.RowCoder`), cached."""
    return derived(data, ("covariate codes",),
                   lambda: RowCoder(data.frame[[COVARIATE_PREFIX + c for c in data.covariates]].to_numpy(float)))


def record_rows(data: Comparisons, cells: Cells, family: Family) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(record, cell, outcome)`` of every judgment ``family`` uses in ``cells`` (eq. hac-meat); outcome 0/1/2: i/j/tie."""
    people = bool(cells.is_human.all())  # the stable sort keeps the people's judgments in the same order either way
    J = derived(data, ("judgments by cell", people), lambda: _judgments(data, people))
    if J is None:
        return None
    key, rec, outcome = J
    key_cell = pair_keys(cells, data.N) * 3 + np.where(cells.is_human, 0, cells.a) + 1
    if data.p:
        assert cells.z is not None  # the cells of data with covariates carry them
        rc = _z_codes(data)
        key_cell = key_cell * len(rc) + rc.code(cells.z)
    lo, hi = np.searchsorted(key, key_cell, "left"), np.searchsorted(key, key_cell, "right")
    cnt = hi - lo
    cell = np.repeat(np.arange(key_cell.size), cnt)
    rows = np.arange(int(cnt.sum())) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)  # the judgments of each cell
    keep = outcome[rows] < (2 if family.is_binary else 3)
    return rec[rows][keep], cell[keep], outcome[rows][keep].astype(np.int64)


@dataclass(frozen=True)
class Influence:
    """Influence ``u_c = A j_c`` of a group of targets (eq. weighted-empirical-sandwich), factored (``U = J A^T``).

    Only ``A`` and ``P x P`` matrices are dense.  ``source`` the cells: the Jacobian ``J`` of their channels (rows
    ``k m + c``), their statistics and record rows; ``A`` (q x P) maps a parameter score to the targets; ``n_zero``
    the bread's zero eigenvalues (a GLM's).
    """

    source: MeatSource
    A: np.ndarray
    n_zero: int = 0

    def linearization(self, what: str, blocks: dict[str, slice], **kwargs: Any) -> Linearization:
        """Return the :class:`~pydial.inference.meats.Linearization` of these targets (``stage_one``, ``tie_labels``)."""
        return Linearization(self.source, self.A, blocks, what, **kwargs)

    def covariance(self, data: Comparisons, cov_type: str, what: str = "the estimates") -> np.ndarray:
        """Return ``A M A^T`` with the meat ``M`` of type ``cov_type`` (:func:`pydial.inference.meats.parameter_meat`)."""
        return self.linearization(what, {}).covariance(data, cov_type)

    def dense(self) -> np.ndarray:
        """``U = J A^T`` (channels x cells by q); for checks on small problems only."""
        return np.asarray(as_sparse(self.source.J) @ self.A.T)


def _concatenate(arrays: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(arrays)``, or a view when they are adjacent slices of one array, in order (no copy)."""
    a0 = arrays[0]
    base = a0.base if a0.base is not None else a0
    start = a0.__array_interface__["data"][0]
    end = start
    for a in arrays:
        if a.ndim != 1 or a.base is not base or not a.flags.c_contiguous or a.__array_interface__["data"][0] != end:
            return np.concatenate(arrays)
        end += a.nbytes
    if base.ndim != 1 or not base.flags.c_contiguous or base.dtype != a0.dtype:
        return np.concatenate(arrays)
    offset = (start - base.__array_interface__["data"][0]) // a0.itemsize
    return base[offset:offset + (end - start) // a0.itemsize]


def _stack_stats(parts: list[CellStats]) -> CellStats:
    """Stack the cells' statistics of one form; a field (e.g. the observed information) only when every part has it."""
    if any(p.binary != parts[0].binary for p in parts):
        raise ArgumentError("cells of the binary family's GLMs stack only with their own kind")
    cols = {f.name: [getattr(p, f.name) for p in parts] for f in dataclasses.fields(CellStats)}
    return CellStats(**{name: _concatenate(vals) for name, vals in cols.items() if all(v is not None for v in vals)})


def stack_influence(parts: list[Influence], A: np.ndarray | None = None) -> Influence:
    """Stack blocks of cells with their own parameters (``J`` block-diagonal by channel, ``A`` side by side, or ``A``).

    Factored Jacobians (the binary family's structured cells) stay factored, block by block
    (:class:`~pydial.inference.meats.BlockJacobian`).
    """
    src = [p.source for p in parts]
    ms = [s.stats.w.size for s in src]
    C = src[0].J.shape[0] // ms[0]  # channels: 2, or 1 for the binary family
    if C == 1 and not all(sp.issparse(s.J) or isinstance(s.J, np.ndarray) for s in src):
        J: Any = BlockJacobian(tuple(s.J for s in src))
    else:
        J = sp.vstack([sp.block_diag([sp.csr_matrix(s.J)[k * m:(k + 1) * m] if C > 1 else s.J for s, m in zip(src, ms)])
                       for k in range(C)], format="csr")
    rec: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    recs = [s.record_rows for s in src if s.record_rows is not None]
    if len(recs) == len(src):
        off = np.cumsum([0] + ms[:-1])
        rec = cast(tuple[np.ndarray, np.ndarray, np.ndarray],
                   tuple(np.concatenate(z) for z in zip(*[(r[0], r[1] + o, r[2]) for r, o in zip(recs, off)])))
    A = np.hstack([p.A for p in parts]) if A is None else A
    return Influence(MeatSource(J, _stack_stats([s.stats for s in src]), rec), A)


def objective_influence(data: Comparisons, obj: Objective, x: np.ndarray, A_x: np.ndarray,
                        coords: np.ndarray | slice = slice(None)) -> Influence:
    """Influence ``u_c = A_x T_ext[:, coords]^T j_c`` of ``obj``'s cells at ``x`` (eq. weighted-empirical-sandwich).

    ``j_c`` the derivatives of the cell's channels, ``A_x`` the targets' map of a score (``E H^+``).  The binary family's
    one channel ``d eta / d phi`` stays factored (never a dense cells x parameters matrix), its records found from the
    data when asked; the others' ``[d eta; d log nu]`` are sparse.
    """
    A = np.asarray((obj.T_ext[:, coords] @ np.asarray(A_x).T).T)
    if obj.family.is_binary:
        return Influence(MeatSource(CellJacobian(obj, obj.split(x)[0]), cell_stats(obj, x)), A)
    return Influence(MeatSource(obj.ext_jacobian(x), cell_stats(obj, x), record_rows(data, obj.cells, obj.family)), A)


def bread(obj: Objective, x: np.ndarray, H: np.ndarray | None = None, coords: np.ndarray | None = None) -> np.ndarray:
    """Return ``H^+``, the pseudo-inverse Hessian of ``obj`` at ``x`` on ``coords`` (``H``: that Hessian when known).

    The binary family's off the gauge (Lemma overparam-invariance): one Cholesky factorization when the gauge
    tangents are certified flat (:func:`~pydial.optim.pinv_gauge`); else, and for the tie families (as their weight
    path's ``H^+``), by eigen-decomposition.
    """
    if H is None:
        H = obj.value_grad_hess(x)[2]
        H = H if coords is None else H[np.ix_(coords, coords)]
    Z = obj.chart.gauge_directions(x[: obj.chart.dim]) if obj.family.is_binary else None
    return pinv_sym(H, gauge=Z if Z is None or coords is None else Z[coords])[0]


def target_jacobian_x(ch: Chart, obj: Objective, x: np.ndarray) -> np.ndarray:
    """Jacobian in ``x`` of the targets ``(s, log nu_H, beta)`` (``log nu_H`` only when free, ``beta`` with covariates)."""
    T = ch.target_jacobian(x[: ch.dim])
    E = np.zeros((T.shape[0], obj.dim))
    E[:, : ch.dim] = T
    if ch.K in obj.free:  # the row of log nu_H after the scores
        E = np.insert(E, ch.N, np.eye(obj.dim)[ch.dim + int(np.flatnonzero(obj.free == ch.K)[0])], axis=0)
    return E


def finite_influence(data: Comparisons, ch: Chart, lambda_: float, x: np.ndarray, family: Family = BINARY,
                     hess_pinv: np.ndarray | None = None) -> Influence:
    """Return the influence ``u_c = E H^+ j_c`` of the targets ``E`` (:func:`target_jacobian_x`) at a finite weight.

    Eq. weighted-empirical-sandwich; ``hess_pinv``: ``H^+`` when known (the weight path's), else the :func:`bread` of
    ``Q_lambda`` without its penalty.
    """
    obj = Objective.weighted(ch, data, lambda_, ties=family)
    return objective_influence(data, obj, x, target_jacobian_x(ch, obj, x) @ (bread(obj, x) if hess_pinv is None else hess_pinv))


def staged_influence(data: Comparisons, sf: Any, family: Family = BINARY) -> tuple[Influence, int]:
    """Two-step influence of ``(s, log nu_H, beta)`` at the staged endpoint (eq. staged-calibrated-estimator), stage-one columns.

    LLM cells ``u = (dt/dxi - dt/dc C^{-1} H_c_xi) H_xi^+ j_c`` (first; their columns of ``A`` are the stage one that
    ``"fixed-basis"`` drops), human cells ``u = dt/dc C^{-1} j_c``, ``c = (c_H, beta_H, log nu_H)``
    (:func:`~pydial.inference.linearization.two_step_maps`).
    """
    ch, x = sf.chart, sf.x
    oL, oH = (Objective.weighted(ch, data, lam, ties=family, free=sf.free) for lam in (np.inf, 0.0))
    s2 = np.append(ch.human_coordinates, ch.dim + np.flatnonzero(sf.free == ch.K))  # with log nu_H when free
    xi = np.setdiff1d(np.arange(oL.dim), s2)
    HH = oH.value_grad_hess(x)[2]
    E = target_jacobian_x(ch, oL, x)
    total, A_H = two_step_maps(E[:, xi], E[:, s2], HH[np.ix_(s2, s2)], HH[np.ix_(s2, xi)],
                               "(c_H, nu_H)" if s2.size > ch.human_coordinates.size else "c_H")
    # H_xi of l_L is the LLM-only fit's Hessian when that fit ends at the staged fit's coordinates (staged_fit)
    HL = sf.llm_opt.hess_at(x[xi]) if sf.llm_opt is not None else None
    U_L = objective_influence(data, oL, x, total @ bread(oL, x, HL, xi), xi)
    return stack_influence([U_L, objective_influence(data, oH, x, A_H, s2)]), U_L.A.shape[1]


def judge_effect_linearizations(data: Comparisons, sf: Any, family: Family = BINARY) -> tuple[Linearization, ...]:
    """Linearizations of the LLM-only fit's position effects ``b``, judges' ``log nu`` and loadings ``gamma``.

    Bread ``H(l_L)^+`` (Prop. stage-one-normality; the fit's Hessian when kept), one influence cached on ``data``
    for every fit of that LLM-only fit; ``gamma = consensus_gamma(S)``'s Jacobian by central differences.  ``b``
    and ``gamma`` only with position effects, ``log nu`` for the judges with ties.
    """
    chL, xL = sf.llm_chart, sf.llm_x
    th, nt = xL[: chL.dim], sf.llm_free.size
    if not (chL.order or nt):
        return ()

    def build() -> Influence:
        obj = Objective.weighted(chL, data, np.inf, ties=family, free=sf.llm_free)
        H = sf.llm_opt.hess_at(xL) if sf.llm_opt is not None else None
        return objective_influence(data, obj, xL, bread(obj, xL, H))

    U = derived(data, ("judge effect influence", family.name, chL, xL.tobytes()), build)  # A = H^+ T_ext^T
    out = []
    if chL.order:
        out.append(Linearization(U.source, U.A[chL.slices["b"]], {"b": slice(0, data.K)}, "the position effects b"))
    if nt:
        out.append(Linearization(U.source, U.A[chL.dim:], {"log_nu": slice(0, nt)}, "the judges' tie parameters",
                                 tie_labels=tuple(data.judges[int(g)] for g in sf.llm_free)))
    if chL.order:
        Eg = np.column_stack([(consensus_gamma(chL.S(th + e)) - consensus_gamma(chL.S(th - e))) / 2e-6
                              for e in 1e-6 * np.eye(chL.dim)])
        out.append(Linearization(U.source, Eg @ U.A[: chL.dim], {"gamma": slice(0, data.K)}, "the consensus loadings gamma"))
    return tuple(out)


def glm_influence(data: Comparisons, family: Family, X: Design, x: np.ndarray, weight: float, E: np.ndarray, *,
                  unit: bool = False, cells: Cells | None = None, penalty: str | None = None) -> tuple[Influence, np.ndarray]:
    """Influence ``u = E H^{-1} (channels)`` of a GLM of ``family`` (eq. weighted-empirical-sandwich), and ``H``.

    Design ``X``, ``x = (beta, l)`` when the cells (default the people's) hold a tie; ``unit=True``: unit
    weights, no records (GACV).  The ``"fisher"`` meat is the observed information; the returned ``H`` is
    penalized by ``penalty`` (for GACV), the bread of ``u`` not.
    """
    people = cells is None  # the people's cells: built, and their judgments found, once per data set
    if cells is None:
        cells = derived(data, ("people's cells", family.is_binary),
                        lambda: Cells.stack(data, 0.0, 1.0, with_ties=not family.is_binary))
    hc = cells.counts
    model = FamilyGLM(family, hc, X, weight)
    _, _, H = model.terms(x)
    Hinv, n_zero = pinv_sym(H, gauge=np.zeros((H.shape[0], 0)))  # no gauge: a Cholesky factorization when regular
    H = FamilyGLM(family, hc, X, weight, penalty=penalty).terms(x)[2] if penalty is not None else H
    m, p = hc.shape[0], X.shape[1]
    w = np.full(m, 1.0 if unit else weight)
    cw = cells
    rec = (None if unit  # GACV's unit weights use the binomial meat alone
           else derived(data, ("people's record rows", family.is_binary), lambda: record_rows(data, cw, family)) if people
           else record_rows(data, cells, family))
    eta, key = X @ x[:p], pair_keys(cells, data.N)
    if family.is_binary:  # the binary fast path: one channel, the cell residuals n p - y
        J2, basis, st = X.X, X.basis_csr, CellStats(cells.n, w, cells.is_human, cells.y, expit(eta), pair_key=key)
    else:
        nt = 1 if model.free else 0
        J2 = sp.block_diag([sp.csr_matrix(X.X), sp.csr_matrix(np.ones((m, nt)))], format="csr")  # rows d eta, then d l
        basis = sp.block_diag([X.basis_csr, sp.identity(nt)], format="csr")
        fam, l = (family, x[p]) if nt else (BINARY, 0.0)
        a, b = fam.outcome_terms(eta, l)[1:3]
        d = fam.cell(hc, eta, l)
        info = -np.column_stack([d.d_eta_eta, d.d_eta_l, d.d_l_l])
        st = CellStats.outcomes(hc, fam.probabilities(eta, l), a, b, w, cells.is_human, key, info)
    return Influence(MeatSource(J2, st, rec), np.asarray((basis @ (E @ Hinv).T).T), n_zero), H


def gacv_scores(obj: Objective, x: np.ndarray) -> tuple[Any, CellStats]:
    """Return the derivative channels and unit-weight statistics of ``obj``'s human cells at ``x`` (the scores of eq. gacv)."""
    h = obj.human_part
    return (h.full_jacobian(x) if h.family.is_binary else h.ext_jacobian(x)), cell_stats(h, x, unit_weight=True)


def gacv_trace(H: np.ndarray, jac: Any, st: CellStats, basis: Any, n_h: float, Hp: np.ndarray | None = None) -> float:
    r"""Compute the trace term of eq. gacv, ``tr(H^+ J) / (n_H - 1)``, ``J`` the covariance of the per-comparison human scores.

    ``J`` is the ``"binomial"`` meat of the human cells' channels ``jac`` and unit-weight ``st`` (:func:`gacv_scores`)
    over ``n_h``, pulled back by ``basis`` (``d phi / d x``; ``None``: none); ``Hp``: ``H^+`` if computed.
    """
    Jm = parameter_meat(jac, st, None, "binomial").dense() / n_h
    if basis is not None:
        Bs = sp.csr_matrix(basis)  # the chart maps have about two entries per column
        terms = pull_terms(Bs)
        Jm = np.asarray(Bs.T @ np.asarray(Bs.T @ Jm).T).T if terms is None else sparse_pull_back(terms, Jm)
    if Hp is None:
        Hp, _ = pinv_sym(H)
    return float(np.sum(Hp * Jm)) / (n_h - 1)
