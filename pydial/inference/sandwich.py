r"""Sandwich influence of the fits of every outcome family (eq. weighted-empirical-sandwich) and GACV's trace (eq. gacv)."""

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
from pydial.inference.meats import CellStats, MeatSource, parameter_meat
from pydial.model.chart import Chart, pull_terms, sparse_pull_back
from pydial.model.design import Design
from pydial.model.families import BINARY, Family
from pydial.model.glm import FamilyGLM
from pydial.model.likelihood import Cells, Objective
from pydial.optim import pinv_sym


def outcome_stats(obj: Objective, x: np.ndarray, unit_weight: bool = False) -> CellStats:
    """Outcome :class:`~pydial.inference.meats.CellStats` of the cells at ``x``, with the observed information."""
    eta = obj.eta(x[: obj.chart.dim])
    P, a, b = obj.outcome_derivatives(x, eta)
    d = obj.cell_derivatives(x, eta)
    c = obj.cells
    w = np.ones(c.w.size) if unit_weight else c.w
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
class OutcomeInfluence:
    """Influence ``u = A J2^T`` of outcome cells: ``J2`` ``2m x P`` (``d eta``, then ``d log nu``; ``m x P`` binary GLMs).

    ``st`` the cells' statistics, ``rec`` their record rows, ``n_zero`` the bread's zero eigenvalues.
    """

    J2: Any
    A: np.ndarray
    st: CellStats
    rec: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    n_zero: int = 0

    def linearization(self, what: str, blocks: dict[str, slice], **kwargs: Any) -> Linearization:
        """Return the :class:`~pydial.inference.linearization.Linearization` of these cells (``stage_one``, ``tie_labels``)."""
        return Linearization(MeatSource(self.J2, self.st, self.rec), self.A, blocks, what, **kwargs)

    def covariance(self, data: Comparisons, cov_type: str, what: str) -> np.ndarray:
        """Return ``A M A^T`` with the meat ``M`` of type ``cov_type`` (:func:`pydial.inference.meats.parameter_meat`)."""
        return self.linearization(what, {}).covariance(data, cov_type)


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
    cols = {}
    for f in dataclasses.fields(CellStats):
        vals = [getattr(p, f.name) for p in parts]
        if all(v is not None for v in vals):
            cols[f.name] = _concatenate(vals)
    return CellStats(**cols)


def stack_outcome_influence(parts: list[OutcomeInfluence], A: np.ndarray | None = None) -> OutcomeInfluence:
    """Stack blocks of cells with their own parameters (channels block-diagonal, ``A`` side by side, or ``A`` if given)."""
    ms = [p.st.w.size for p in parts]
    C = parts[0].J2.shape[0] // ms[0]  # channels: 2, or 1 for the binary family's GLMs
    J = sp.vstack([sp.block_diag([sp.csr_matrix(p.J2)[k * m:(k + 1) * m] if C > 1 else p.J2 for p, m in zip(parts, ms)])
                   for k in range(C)], format="csr")
    rec: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    recs = [p.rec for p in parts if p.rec is not None]
    if len(recs) == len(parts):
        off = np.cumsum([0] + ms[:-1])
        rec = cast(tuple[np.ndarray, np.ndarray, np.ndarray],
                   tuple(np.concatenate(z) for z in zip(*[(r[0], r[1] + o, r[2]) for r, o in zip(recs, off)])))
    return OutcomeInfluence(J, np.hstack([p.A for p in parts]) if A is None else A, _stack_stats([p.st for p in parts]), rec)


def objective_outcome_influence(data: Comparisons, obj: Objective, x: np.ndarray, A_x: np.ndarray,
                         coords: np.ndarray | slice = slice(None)) -> OutcomeInfluence:
    """``u_c = A_x T_ext[:, coords]^T (channels of cell c)`` for the cells of ``obj``."""
    Tc = obj.T_ext[:, coords]
    A = np.asarray((Tc @ np.asarray(A_x).T).T) if sp.issparse(Tc) else A_x @ Tc.T
    return OutcomeInfluence(obj.ext_jacobian(x), np.asarray(A), outcome_stats(obj, x), record_rows(data, obj.cells, obj.family))


def target_jacobian_x(ch: Chart, obj: Objective, x: np.ndarray) -> np.ndarray:
    """Jacobian in ``x`` of the targets ``(s, log nu_H, beta)`` (``log nu_H`` only when free, ``beta`` with covariates)."""
    T = ch.target_jacobian(x[: ch.dim])
    E = np.zeros((T.shape[0], obj.dim))
    E[:, : ch.dim] = T
    if ch.K in obj.free:  # the row of log nu_H after the scores
        E = np.insert(E, ch.N, np.eye(obj.dim)[ch.dim + int(np.flatnonzero(obj.free == ch.K)[0])], axis=0)
    return E


def family_finite_influence(data: Comparisons, ch: Chart, lambda_: float, x: np.ndarray, family: Family,
                            hess: np.ndarray | None = None) -> OutcomeInfluence:
    """Sandwich at a finite weight (eq. weighted-empirical-sandwich, pseudo-inverse bread), targets :func:`target_jacobian_x`."""
    obj = Objective.weighted(ch, data, lambda_, ties=family)
    H = hess if hess is not None else obj.value_grad_hess(x)[2]
    Hp, _ = pinv_sym(H)
    return objective_outcome_influence(data, obj, x, target_jacobian_x(ch, obj, x) @ Hp)


def family_staged_influence(data: Comparisons, sf: Any, family: Family) -> tuple[OutcomeInfluence, int]:
    """Two-step influence of ``(s, log nu_H, beta)`` at the staged endpoint (eq. staged-calibrated-estimator), stage-one columns.

    LLM cells through the LLM-only fit, human cells through ``(c, beta_H, log nu_H)``
    (:func:`~pydial.inference.linearization.two_step_maps`).
    """
    ch, x = sf.chart, sf.x
    oL, oH = (Objective.weighted(ch, data, lam, ties=family, free=sf.free) for lam in (np.inf, 0.0))
    HL, HH = oL.value_grad_hess(x)[2], oH.value_grad_hess(x)[2]
    s2 = np.append(ch.human_coordinates, ch.dim + np.flatnonzero(sf.free == ch.K))  # with log nu_H when free
    xi = np.setdiff1d(np.arange(oL.dim), s2)
    E = target_jacobian_x(ch, oL, x)
    total, A_H = two_step_maps(E[:, xi], E[:, s2], HH[np.ix_(s2, s2)], HH[np.ix_(s2, xi)], "(c_H, nu_H)")
    HLp, _ = pinv_sym(HL[np.ix_(xi, xi)])
    U_L = objective_outcome_influence(data, oL, x, total @ HLp, xi)
    U_H = objective_outcome_influence(data, oH, x, A_H, s2)
    return stack_outcome_influence([U_L, U_H]), U_L.A.shape[1]


def family_glm_influence(data: Comparisons, family: Family, X: Design, x: np.ndarray, weight: float, E: np.ndarray, *,
                         unit: bool = False, cells: Cells | None = None,
                         penalty: str | None = None) -> tuple[OutcomeInfluence, np.ndarray]:
    """Influence ``u = E H^{-1} (channels)`` of a GLM of ``family`` (eq. weighted-empirical-sandwich), and ``H``.

    Design ``X``, ``x = (beta, l)`` when the cells (default the people's) hold a tie; ``unit=True``: unit
    weights, no records (GACV).  The ``"fisher"`` meat is the observed information; the returned ``H`` is
    penalized by ``penalty`` (for GACV), the bread of ``u`` not.
    """
    people = cells is None  # the people's cells: built, and their judgments found, once per data set
    if people:
        cells = derived(data, ("people's cells", family.is_binary),
                        lambda: Cells.stack(data, 0.0, 1.0, with_ties=not family.is_binary))
    assert cells is not None
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
    return OutcomeInfluence(J2, np.asarray((basis @ (E @ Hinv).T).T), st, rec, n_zero), H


def gacv_scores(obj: Objective, x: np.ndarray) -> tuple[Any, CellStats]:
    """Return the derivative channels and unit-weight statistics of ``obj``'s human cells at ``x`` (the scores of eq. gacv)."""
    h = obj.human_part
    if obj.family.is_binary:  # one channel and the cell residuals n p - y
        c = h.cells
        return h.full_jacobian(x), CellStats.from_parts([(c.n, c.y, h.probabilities(x), 1.0, True)])
    return h.ext_jacobian(x), outcome_stats(h, x, unit_weight=True)


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
