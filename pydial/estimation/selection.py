r"""The DIAL-Ada weight path, its regularity guards and GACV selection (Alg. DIAL-Ada, App. lambda-selection).

Candidate weights ``multiples * n_L / n_H`` plus the endpoints ``lambda = 0`` (the people's model) and
``lambda = inf`` (DIAL-Anc); GACV (eq. gacv) is ``l_H(s_lambda) + tr(H^+ J) / (n_H - 1)``, with the penalized
Hessian under ``penalty="firth"``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers
from pydial.estimation.glm import NUMPY, glm, normalizer
from pydial.model.glm import has_tie_parameter
from pydial.model.chart import Chart, difference_design
from pydial.model.design import Design, centered_design
from pydial.model.families import BINARY, Family
from pydial.model.likelihood import Cells, Objective
from pydial.model.cells import family_totals, human_counts, human_loss_at, human_table
from pydial.inference.sandwich import gacv_scores, gacv_trace
from pydial.optim import BOX, ZERO_EIG_RTOL, OptimResult, newton, pinv_from_eigh, pinv_gauge, single_threaded_blas
from pydial.exceptions import ConvergenceError, ConvergenceWarning

DEFAULT_MULTIPLES = tuple(np.logspace(-2, 1, 7))
SIMULATION_MULTIPLES = tuple(np.logspace(-1, 1, 7))
SCORE_LIMIT = 10.0
SELECTION_RULES: tuple[str, ...] = ("gacv", "endpoint-margin")
"""The rules choosing the weight on the path (:class:`Selection`)."""
GACV_TOLERANCE = 1e-6
r"""GACV differences up to this size are near-ties: a fit stops at ``max |grad Q_lambda| <= 1e-9``, so GACV moves
by that over the smallest non-gauge curvature per comparison, ``1e-9 / 1e-3 = 1e-6``."""


@dataclass(frozen=True)
class Selection:
    r"""How DIAL-Ada and DIAL-noPos choose the weight (and rank) on the path: ``fit(..., selection=...)``.

    Built and validated by :class:`~pydial.estimation.spec.ModelSpec` from ``"gacv"``, ``("endpoint-margin", c)``,
    a dict of these attributes or a :class:`Selection`.

    Attributes
    ----------
    rule : {"gacv", "endpoint-margin"}
        ``"gacv"`` (default; App. lambda-selection): the admissible candidate of smallest GACV (eq. gacv).
        ``"endpoint-margin"`` (beyond the paper): the anchored endpoint ``lambda = inf`` (the best over a rank grid)
        when ``GACV(inf) - min_{lambda < inf} GACV(lambda) <= margin / n_H`` (``lambda = 0`` included), else
        GACV's choice: the staged fit unless a finite weight lowers the total human log-loss by more than ``c``.
    margin : float or None
        ``c >= 0`` of ``"endpoint-margin"`` (None for ``"gacv"``).
    tolerance : float
        GACV differences up to ``tolerance`` from the selected candidate's are reported as near-ties
        (``result.gacv`` columns ``gap``, ``near_tie``; the summary); the choice is unchanged.
    """

    rule: str = "gacv"
    margin: float | None = None
    tolerance: float = GACV_TOLERANCE

    def threshold(self, n_human: float) -> float:
        """Return ``margin / n_H``, the GACV margin of the anchored endpoint (0 for ``"gacv"``)."""
        return 0.0 if self.margin is None else self.margin / n_human


@dataclass
class Candidate:
    """One weight of the path: its fit, guards and GACV pieces."""

    lambda_: float
    multiple: float
    s: np.ndarray | None
    theta: np.ndarray | None = None
    opt: OptimResult | None = None
    admissible: bool = False
    reason: str = ""
    loss_human: float = np.nan
    trace: float = np.nan
    n_zero_eig: int = 0
    hess_pinv: np.ndarray | None = field(default=None, repr=False, compare=False)  # H^+ at theta (finite weights)

    @property
    def gacv(self) -> float:
        """``GACV(lambda) = l_H + tr(H^+ J) / (n_H - 1)`` (eq. gacv); NaN if not admissible."""
        return self.loss_human + self.trace if self.admissible else np.nan


@dataclass(frozen=True)
class PathEntry:
    """One candidate of a fitted weight path with the ``chart`` and ``staged_theta`` of its rank (for refits)."""

    chart: Chart
    staged_theta: np.ndarray
    candidate: Candidate

    @classmethod
    def light(cls, chart: Chart, staged_theta: np.ndarray, c: Candidate) -> "PathEntry":
        """Build the entry without the candidate's dense Hessian and its pseudo-inverse (needed only while selecting)."""
        opt = replace(c.opt, hess=None) if c.opt is not None and c.opt.hess is not None else c.opt
        return cls(chart, staged_theta, replace(c, hess_pinv=None, opt=opt))


def guard(ch: Chart, opt: OptimResult, s: np.ndarray, ev: np.ndarray, nz: int) -> tuple[bool, str]:
    """Return ``(admissible, reason)`` of App. lambda-selection from the Hessian's eigenvalues ``ev`` and ``nz`` zeros."""
    if not opt.converged:
        return False, f"not converged ({opt.message})"
    if opt.at_bound.any():
        return False, f"not resolved within the box ({int(opt.at_bound.sum())} coordinates at |x| = {BOX:g})"
    if nz > ch.n_gauge:
        return False, f"{nz} zero Hessian eigenvalues > {ch.n_gauge} gauge invariances"
    if np.abs(s).max() > SCORE_LIMIT:
        return False, f"||s||_inf = {np.abs(s).max():.3g} > {SCORE_LIMIT:g}"
    if np.any(ev < -1e-8 * max(np.abs(ev).max(initial=0.0), 1e-300)):
        return False, "Hessian not positive semi-definite (saddle point)"
    return True, ""


def finite_candidate(data: Comparisons, ch: Chart, lambda_: float, x0: np.ndarray, multiple: float,
                     family: Family = BINARY, engine: Optimizers = NUMPY, *, penalty: str | None = None,
                     warm: Candidate | None = None, polish: bool = True) -> Candidate:
    """Fit ``Q_lambda`` (eq. weighted-loss) of ``family`` from ``x0``, penalized by ``penalty``; guards and GACV pieces.

    The binary family's fit is the engine's ``path`` when it has one, warm-started by ``warm`` (a candidate ending at ``x0``).
    """
    if family.is_binary and engine.path is not None:
        x, opt = engine.path(data, ch, lambda_, x0, warm=None if warm is None or warm.opt is None else (warm.lambda_, warm.opt),
                             polish=polish)
    else:
        opt = engine.joint(data, family, ch, lambda_, x0, penalty=penalty)
        x = opt.x
    obj = Objective.weighted(ch, data, lambda_, penalty, ties=family)
    H = opt.hess_at(x)
    H = obj.value_grad_hess(x)[2] if H is None else H
    th = x[: ch.dim]
    s = ch.scores(th)
    # one factorization for the guards, GACV and the sandwich: Cholesky off the gauge when certified (theta alone)
    pinv = pinv_gauge(H, ch.gauge_directions(th)) if family.is_binary else None
    if pinv is None:
        ev, Q = np.linalg.eigh(0.5 * (H + H.T))
        nz = int(np.sum(np.abs(ev) <= ZERO_EIG_RTOL * max(np.abs(ev).max(), 1e-300)))
    else:
        ev, nz = np.zeros(0), pinv[1]
    ok, reason = guard(ch, opt, s, ev, nz)
    cand = Candidate(lambda_, multiple, s, x, opt, ok, reason, human_loss_at(data, family, ch, x, obj.free), n_zero_eig=nz)
    if ok:
        cand.hess_pinv = pinv_from_eigh(ev, Q)[0] if pinv is None else pinv[0]
        cand.trace = gacv_trace(H, *gacv_scores(obj, x), obj.T_ext, family_totals(data, family)[1], cand.hess_pinv)
    return cand


def path_candidates(cands: list[Candidate], hum: Candidate, include_endpoints: bool | str) -> list[Candidate]:
    """Return one rank's candidates in the GACV table's order: ``hum``, the finite weights from the smallest, ``lambda = inf``.

    ``cands``: the anchored endpoint, then the finite weights from the largest.
    """
    anc = cands[0]
    if not include_endpoints:
        anc = replace(anc, admissible=False, reason=anc.reason or "endpoint excluded (include_endpoints=False); fallback only")
    if include_endpoints == "anchored" and hum.admissible:
        hum = replace(hum, admissible=False, reason="human-only endpoint listed, not competing (include_endpoints='anchored')")
    return ([hum] if include_endpoints else []) + cands[:0:-1] + [anc]


def select_candidate(options: list[tuple[int, Candidate]], table: pd.DataFrame, what: str = "the lambda path",
                     selection: Selection = Selection(), n_human: float = 1.0) -> tuple[int, Candidate, bool]:
    """Choose the admissible ``(rank, candidate)`` of smallest GACV (eq. gacv; or ``selection``'s rule) and if it is the fallback.

    The fallback, the first resolved anchored endpoint, is a ConvergenceWarning; none at all a ConvergenceError.
    """
    ok = [(r, c) for r, c in options if c.admissible]
    fallback = False
    if not ok:
        anc = [(r, c) for r, c in options if np.isinf(c.lambda_) and c.opt is not None and c.opt.resolved and c.s is not None]
        if not anc:
            why = "; ".join(f"lambda={lambda_:.4g}: {reason}" for lambda_, reason in
                            table[["lambda", "reason"]].drop_duplicates("reason").itertuples(index=False))
            raise ConvergenceError(f"no admissible candidate on {what} ({why}); the path:\n" + table.to_string())
        ok, fallback = anc[:1], True
        warnings.warn(ConvergenceWarning("no candidate of the lambda path passed the regularity guards; falling back "
                                         "to the anchored endpoint lambda = inf (see result.gacv for the reasons)",
                                         "no admissible candidate"), stacklevel=4)
    choice = min(ok, key=_gacv_key)
    if selection.rule == "endpoint-margin" and not fallback:
        choice = endpoint_margin(ok, selection.threshold(n_human)) or choice
    return choice[0], choice[1], fallback


def _gacv_key(option: tuple[int, Candidate]) -> float:
    """Sort key of an option: its GACV, ``inf`` when undefined."""
    g = option[1].gacv
    return g if np.isfinite(g) else np.inf


def endpoint_margin(ok: list[tuple[int, Candidate]], threshold: float) -> tuple[int, Candidate] | None:
    """Return the best anchored endpoint when ``GACV(inf) - min_{lambda < inf} GACV <= threshold``, else None."""
    anchored = [rc for rc in ok if np.isinf(rc[1].lambda_)]
    finite = [_gacv_key(rc) for rc in ok if not np.isinf(rc[1].lambda_)]
    if not anchored:
        return None
    best = min(anchored, key=_gacv_key)
    return best if not finite or _gacv_key(best) - min(finite) <= threshold else None


def path_table(options: list[tuple[int, Candidate]], one_human_row: bool = False) -> pd.DataFrame:
    """Tabulate GACV: rank, lambda, multiple, gacv, l_H, trace, admissible, reason (the human endpoint once if asked)."""
    columns = {"lambda": "lambda_", "multiple": "multiple", "gacv": "gacv", "l_H": "loss_human", "trace": "trace",
               "admissible": "admissible", "reason": "reason"}
    df = pd.DataFrame({"rank": [r for r, _ in options]}
                      | {name: [getattr(c, attr) for _, c in options] for name, attr in columns.items()})
    if one_human_row:
        df = df.loc[~((df["lambda"] == 0) & df.duplicated(subset=["lambda"], keep="first"))].reset_index(drop=True)
    return df


def annotate_selection(table: pd.DataFrame, rank: int, lambda_: float, selection: Selection,
                       n_human: float) -> pd.DataFrame:
    """Return ``table`` with the columns ``gap`` and ``near_tie`` and the selection's ``attrs`` (``result.gacv``)."""
    tab = table.copy()
    g = tab["gacv"].to_numpy(float)
    adm = tab["admissible"].to_numpy(bool) & np.isfinite(g)
    lambdas_ = tab["lambda"].to_numpy(float)
    row = int(np.flatnonzero((lambdas_ == lambda_) & ((tab["rank"].to_numpy() == rank) | (lambdas_ == 0)))[0])
    tab["gap"] = np.where(adm, g - (g[adm].min() if adm.any() else np.nan), np.nan)
    near = adm & (np.abs(g - g[row]) <= selection.tolerance)
    tab["near_tie"] = near & (near.sum() > 1)
    inf, fin = adm & np.isinf(lambdas_), adm & ~np.isinf(lambdas_)
    tab.attrs.update(selection=selection.rule, margin=selection.margin,
                     margin_threshold=selection.threshold(n_human) if selection.margin is not None else None,
                     endpoint_gap=float(g[inf].min() - g[fin].min()) if inf.any() and fin.any() else np.nan,
                     near_tie_tolerance=selection.tolerance, selected_row=row)
    return tab


def _weight_texts(tab: pd.DataFrame, rows: list[int]) -> list[str]:
    """Return ``lambda = ...`` of ``tab``'s ``rows``, with the digits that tell them apart (and the rank when several)."""
    lambdas_ = tab["lambda"].to_numpy(float)[rows]
    for digits in (4, 6, 8, 10, 12, 17):
        texts = ["inf" if np.isinf(v) else f"{v:.{digits}g}" for v in lambdas_]
        if len(set(texts)) == len(set(lambdas_.tolist())):
            break
    if tab["rank"].nunique() > 1:
        return [f"(r = {int(r)}, lambda = {t})" for r, t in zip(tab["rank"].to_numpy()[rows], texts)]
    return [f"lambda = {t}" for t in texts]


def selection_lines(tab: pd.DataFrame) -> list[str]:
    """Return the summary's lines on how the weight was chosen and its GACV near-ties (:func:`annotate_selection`)."""
    a = tab.attrs
    if "selected_row" not in a:
        return []
    row = a["selected_row"]
    tied = [int(i) for i in np.flatnonzero(tab["near_tie"].to_numpy(bool)) if i != row]
    names = _weight_texts(tab, [row, *tied])
    rule = "smallest GACV"
    if a["selection"] == "endpoint-margin":  # with its statistic
        gap, thr = a["endpoint_gap"], a["margin_threshold"]
        test = ("" if not np.isfinite(gap) else
                f": GACV(inf) - min finite GACV = {gap:.3g} {'<=' if gap <= thr else '>'} c/n_H = {thr:.3g}")
        rule = f"endpoint-margin rule with c = {a['margin']:g} (beyond the paper){test}"
    out = [f"lambda selection: {rule} -> {names[0]}"]
    if tied:
        spread = float(np.abs(tab["gacv"].iloc[tied].to_numpy(float) - tab["gacv"].iloc[row]).max())
        out.append(f"GACV near-tie: {', '.join(names[:-1])} and {names[-1]} differ by {spread:.1g} "
                   f"(<= tolerance {a['near_tie_tolerance']:.1g}): below what the optimizer resolves")
    return out


@single_threaded_blas
def loo_cv(data: Comparisons, ch: Chart, lambda_: float, theta: np.ndarray, family: Family = BINARY) -> float:
    r"""Exact leave-one-human-comparison-out loss :math:`CV_{loo}(\lambda)` (Thm. gacv) by refits, in ``family``.

    One refit per (human cell, outcome), the human loss normalized by ``n_H - 1``; ``lambda_`` finite, ``inf``
    (``c`` refitted, ``M`` fixed) or 0 (the people's model); ``theta`` then a tie family's log tie parameters.
    """
    N = data.N
    H = human_table(data, family)
    hi, hj, counts = H.i, H.j, human_counts(data, family)
    n_h = float(counts.sum())
    th = np.asarray(theta, float)[: ch.dim]
    if np.isinf(lambda_):
        X: Design = Design(difference_design(hi, hj, N), ch.structure(th).basis(ch.calibration))
        start = ch.calibration_coordinates(th)
    elif lambda_ == 0:
        X = centered_design(hi, hj, N)
        start = np.zeros(N - 1)
    else:
        n_l = family_totals(data, family)[0]
        base = Cells.stack(data, lambda_ / n_l, 1.0 / (n_h - 1), with_ties=not family.is_binary)
        hpos = np.flatnonzero(base.is_human)
        free0 = np.unique(base.g[base.counts[:, 2] > 0])  # the groups whose log nu follow theta in ``theta``
    total = 0.0
    for c, o in zip(*np.nonzero(counts)):
        c2 = counts.copy()
        c2[c, o] -= 1
        if np.isinf(lambda_) or lambda_ == 0:
            free = has_tie_parameter(family, c2)
            x0 = np.append(start, family.log_nu_start(c2)) if free else start
            opt = glm(family, c2, X, x0, weight=1.0 / (n_h - 1))
            eta = float((X @ opt.x[: X.shape[1]])[c])
            l = float(opt.x[-1]) if free else -np.inf
        else:
            if family.is_binary:
                nn, yy = base.n.copy(), base.y.copy()
                nn[hpos], yy[hpos] = c2[:, 0] + c2[:, 1], c2[:, 0]
                obj: Objective = Objective(ch, replace(base, n=nn, y=yy))
                x0 = th
            else:
                cnt = base.counts.copy()
                cnt[hpos] = c2
                cells = replace(base, outcome_counts=cnt, n=cnt.sum(1), y=cnt[:, 0])
                obj = Objective(ch, cells, ties=family)
                keep = np.isin(free0, obj.free)  # the people lose their tie parameter with their last tie
                x0 = np.concatenate([th, np.asarray(theta, float)[ch.dim:][keep]])
            r = newton(obj.value_grad_hess, x0, value=obj.value, normalize=normalizer(ch))
            eta = float(obj.eta(r.x[: ch.dim])[hpos[c]])
            l = float(obj.log_nu(r.x)[ch.K]) if not obj.family.is_binary else -np.inf
        fam = family if np.isfinite(l) else BINARY
        p = fam.probabilities(np.array([eta]), 0.0 if fam.is_binary else l)[0, o]
        total += float(counts[c, o]) * -float(np.log(p))
    return total / n_h
