r"""The people's model and each judge's model for every outcome family: ``pydial.fit(data, "human" | "judges", ties=...)``.

The centered BTL of the people (eq. human-only-estimator) and each LLM judge's order-effect BTL (eq.
binomial-model-llm), binary or with ties, fitted by :func:`pydial.estimation.glm.glm` or Stan, with the
linearization of every target.  A singular Hessian (possible only with ``check=False``) is a
:class:`~pydial.ConvergenceWarning` with status ``"not identified"``, and the fit is marked not converged.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from pydial.data.comparisons import CellTable, Comparisons
from pydial.estimation.engines import Optimizers
from pydial.estimation.fitstats import FitStats, judges_stats
from pydial.estimation.glm import glm
from pydial.model.glm import has_tie_parameter
from pydial.estimation.results import Estimate, tie_log_nu
from pydial.estimation.steps import NUMPY, family_human_influence, human_effects, human_parameters
from pydial.inference.sandwich import Influence, glm_influence, stack_influence
from pydial.exceptions import ConvergenceWarning
from pydial.inference.linearization import target_slices
from pydial.model.chart import centering_basis
from pydial.model.design import centered_design
from pydial.model.families import BINARY, Family
from pydial.model.likelihood import Cells
from pydial.model.cells import family_totals, tie_human_loss
from pydial.optim import warn_unresolved

__all__ = ["tie_log_nu_start", "fit_btl"]


def tie_log_nu_start(family: Family, cells: CellTable, G: int) -> np.ndarray:
    """Return the starting ``log nu`` of groups ``0..G-1`` from their tie rates (:meth:`Family.log_nu_start`; none if binary)."""
    if family.is_binary:
        return np.zeros(0)
    return np.array([family.log_nu_start(cells.counts[cells.judge == g]) for g in range(G)], float)


def _identified(U: Influence, what: str) -> bool:
    """Warn when the GLM's Hessian is singular (its design does not identify ``what``); return whether it is regular."""
    if U.n_zero:
        warnings.warn(ConvergenceWarning(f"{what}: the Hessian is singular in {U.n_zero} direction(s); the design does "
                                         "not identify the parameters (run pydial.check_design)", "not identified"),
                      stacklevel=4)
    return not U.n_zero


def _human(data: Comparisons, family: Family, engine: Optimizers, penalty: str | None) -> Estimate:
    """Fit the people's model: the ``lambda = 0`` fit of :func:`~pydial.estimation.steps.family_human_influence`."""
    N = data.N
    p = human_effects(data).size  # the people's free covariate effects
    what = "human BTL" if family.is_binary else "human tie model"
    opt, U, lh = family_human_influence(data, family, engine, penalty)
    warn_unresolved(opt, what)
    regular = _identified(U, what)
    free = bool(np.isfinite(lh))
    blocks = target_slices(N, N + free + p, free)
    lin = U.linearization(f"the {what} scores", blocks, tie_labels=(data.human_judge,) if free else ())
    s, beta_h, _ = human_parameters(data, opt.x, free)
    beta = None if beta_h is None or not p else beta_h[None, :]
    loss = tie_human_loss(family, s, lh, data, beta)
    llf = -family_totals(data, family)[1] * loss  # the people's model: l_H is its log-likelihood / n_H
    return Estimate(s=s, log_nu=None if family.is_binary else tie_log_nu([data.human_judge], np.array([lh])),
                    lambda_=0.0, loss_human=loss, converged=opt.resolved and regular,
                    grad_norm=opt.grad_norm, linearization=(lin,), beta=beta,
                    beta_labels=(data.human_judge,) if p else (), stats=FitStats(llf, int(opt.x.size), llf))


def _judges(data: Comparisons, family: Family, engine: Optimizers, seed: int | None, backend: str | None,
            penalty: str | None) -> Estimate:
    """Fit each judge's GLM in ``(s T-chart, b, beta_k, log nu_k)``, linearized jointly and judge by judge."""
    N, K, p = data.N, data.K, data.p
    T = centering_basis(N)
    cells = Cells.stack(data, 1.0, 0.0, with_ties=not family.is_binary)
    support = data.covariate_support[:K]  # each judge's free covariate effects (Comparisons.effect_columns)
    pk = support.sum(axis=1)
    offsets = np.concatenate([[0], np.cumsum(pk)])
    stan = None
    if engine.btl is not None:
        table = data.cell_table("llm", with_ties=not family.is_binary)
        stan = engine.btl(table, N=N, groups=K, family=family, log_nu0=tie_log_nu_start(family, table, K),
                          seed=seed, backend=backend, penalty=penalty)
        if not stan.converged:
            warnings.warn(ConvergenceWarning(f"judges' model: optimizer did not converge ({stan.message})",
                                             "not converged"), stacklevel=3)
    g = cells.g
    by_judge = bool(np.all(g[1:] >= g[:-1]))  # the judges' cells as slices (views), else masks
    bounds = np.searchsorted(g, np.arange(K + 1))
    rows = [slice(bounds[k], bounds[k + 1]) if by_judge else g == k for k in range(K)]
    free = np.array([not family.is_binary and has_tie_parameter(family, cells.counts[r]) for r in rows], bool)
    idx = np.flatnonzero(free)
    nb = N + K + idx.size  # the start of the covariate effects among the joint targets
    q = nb + int(offsets[-1])
    joint, own, xs, opts = [], [], [], []
    regular = True
    A = np.zeros((q, K * (N + 1) + int(offsets[-1]) + idx.size))  # the joint map, filled judge by judge (columns: each judge's J)
    col = 0
    for k in range(K):  # one judge at a time: its cells and design are dropped once it is linearized
        c = cells.select(rows[k])
        X = centered_design(c.i, c.j, N, c.a, data.effect_columns(c.z, k))
        p_k = int(pk[k])
        if stan is None:
            opts.append(glm(family, c.counts, X, weight=1.0 / float(c.n.sum()), penalty=penalty))
            warn_unresolved(opts[-1], f"judge {data.judges[k]!r}" + ("" if family.is_binary else " tie model"))
            xs.append(opts[-1].x)
        else:  # the centered chart s = T beta (beta: the first N - 1 scores); a judge without ties is binary (nu = 0)
            xs.append(np.concatenate([stan.S[k, : N - 1], [stan.b[k]],
                                      stan.beta[k][support[k]] if p and stan.beta is not None else [],
                                      [stan.log_nu[k]] if free[k] else []]))
        E = np.zeros((q + N, X.shape[1] + free[k]))
        E[:N, : N - 1] = T / K
        E[N + k, N - 1] = 1.0
        if free[k]:
            E[N + K + int(np.searchsorted(idx, k)), N + p_k] = 1.0
        E[nb + offsets[k] : nb + offsets[k + 1], N : N + p_k] = np.eye(p_k)
        E[q:, : N - 1] = T
        U, _ = glm_influence(data, family, X, xs[k], 1.0 / float(c.n.sum()), E, cells=c)
        regular &= _identified(U, f"judge {data.judges[k]!r}")
        width = U.A.shape[1]
        A[:, col:col + width] = U.A[:q]
        col += width
        joint.append(replace(U, A=A[:, :0]))
        own.append(replace(U, A=U.A[q:].copy()).linearization(
            f"the scores of judge {data.judges[k]!r}", {"judge_scores": slice(0, N)}))
    blocks = ({"scores": slice(0, N), "b": slice(N, N + K)} | ({"log_nu": slice(N + K, nb)} if idx.size else {})
              | ({"beta": slice(nb, q)} if p else {}))
    what = "the mean judge scores and position effects" + (" and tie parameters" if idx.size else "")
    lin = stack_influence(joint, A).linearization(what, blocks, tie_labels=tuple(data.judges[int(k)] for k in idx))
    S = np.array([T @ x[: N - 1] for x in xs])
    log_nu = np.array([x[-1] if fr else -np.inf for x, fr in zip(xs, free)])
    converged = regular and (stan.converged if stan is not None else all(o.resolved for o in opts))
    grad_norm = stan.grad_norm if stan is not None else max(o.grad_norm for o in opts)
    beta = np.zeros((K, p)) if p else None
    if beta is not None:  # each judge's free effects, row by row
        beta[support] = np.concatenate([x[N : N + pk[k]] for k, x in enumerate(xs)])
    b = np.array([x[N - 1] for x in xs])
    stats = judges_stats(data, family, S, b, log_nu, beta, sum(int(x.size) for x in xs))
    return Estimate(s=S.mean(0), b=b, judge_scores=S, stats=stats,
                    log_nu=None if family.is_binary else tie_log_nu(list(data.judges), log_nu),
                    lambda_=np.nan, loss_human=np.nan, converged=converged, grad_norm=grad_norm,
                    linearization=(lin, *own), beta=beta, beta_labels=tuple(data.judges) if p else ())


def fit_btl(data: Comparisons, method: str, *, family: Family = BINARY, seed: int | None = None,
            backend: str | None = None, engine: Optimizers | None = None, penalty: str | None = None) -> Estimate:
    """Fit ``human`` (eq. human-only-estimator) or ``judges`` (eq. binomial-model-llm) in ``family``, numpy's covariances.

    ``engine`` optimizes the people's model (``engine.human``) and the judges' (``engine.btl``; else the GLM solver judge by
    judge); ``penalty="firth"``: Firth estimates, unpenalized information as the bread.  Returns the :class:`Estimate`.
    """
    engine = NUMPY if engine is None else engine
    return _human(data, family, engine, penalty) if method == "human" else _judges(data, family, engine, seed, backend, penalty)
