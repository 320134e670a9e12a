r"""Tie models of the people and the judges: ``pydial.fit(..., ties="davidson" | "rao-kupper")``, either engine.

Davidson's (1970) model (or Rao and Kupper's, 1967) for the people
(``method="human"``) and the same with judge-specific order effects for the LLM
judges (``method="judges"``, Davidson-Beaver 1977); the cell likelihoods are those
of :mod:`pydial.model.families` (Stan ``ties`` 1 and 2 of
``stan/include/paired_likelihoods.stan``).  Given a decisive outcome the
Davidson model is eq. binomial-model-llm; ``nu -> 0`` removes the ties.  The tie
judgments that the binary models exclude are used here.

These are the GLMs of the binary ``human`` and ``judges`` fits with another outcome
family, on the same path: the optimum comes from the one GLM solver
(:func:`pydial.estimation.glm.glm`, the people's model shared with the ``lambda = 0``
endpoint of :mod:`pydial.estimation.steps`) or from Stan (``judges.stan``), and the
fit keeps a :class:`~pydial.inference.linearization.Linearization` of its scores,
position effects and ``log nu`` (:func:`pydial.estimation.steps.family_glm_influence`),
so every meat of ``cov_type`` (eq. weighted-empirical-sandwich, eq.
cell-clustered-meat, eq. hac-meat) and :meth:`~pydial.estimation.results.DialResult.with_cov`
work as for the binary fits.  The ``"fisher"`` covariance is the inverse observed
information (for Davidson's model, a multinomial logit, also the expected one), and
``nu``'s standard error is the delta method on ``log nu``.
"""

from __future__ import annotations

import warnings

import numpy as np

from pydial.data.comparisons import CellTable, Comparisons
from pydial.estimation.engines import FamilyOptimizers
from pydial.estimation.glm import glm, has_tie_parameter
from pydial.estimation.steps import (
    NUMPY_FAMILY,
    OutcomeInfluence,
    family_glm_influence,
    family_human_fit,
    stack_outcome_influence,
)
from pydial.exceptions import ArgumentError, ConvergenceWarning
from pydial.estimation.results import Estimate, tie_log_nu
from pydial.model.chart import centering_basis
from pydial.model.design import centered_design
from pydial.model.families import log_nu_start
from pydial.model.likelihood import Cells, tie_human_loss, tie_totals
from pydial.optim import warn_unresolved

__all__ = ["TIE_MODELS", "TIE_METHODS", "tie_log_nu_start", "fit_ties"]

TIE_MODELS: tuple[str, ...] = ("davidson", "rao-kupper")
"""The tie models of ``pydial.fit(..., ties=...)``."""

TIE_METHODS: tuple[str, ...] = ("human", "judges", "pooled", "dial-anc", "dial-ada", "dial-nopos", "atc")
"""Methods that take ``ties=``: ``human`` and ``judges`` (this module), the structured DIAL
methods (:mod:`pydial.estimation.steps`) and the baselines ``pooled`` and ``atc``
(:mod:`pydial.estimation.baselines`)."""


def tie_log_nu_start(ties: str, cells: CellTable, G: int) -> np.ndarray:
    """Return the starting ``log nu`` of groups ``0..G-1`` from their tie rates (:func:`pydial.model.families.log_nu_start`)."""
    return np.array([log_nu_start(ties, cells.counts[cells.judge == g]) for g in range(G)], float)


def _human(data: Comparisons, ties: str, engine: FamilyOptimizers, penalty: str | None) -> Estimate:
    """Fit the people's tie model: the ``lambda = 0`` fit of :func:`~pydial.estimation.steps.family_human_fit`."""
    N = data.N
    opt, free, X = family_human_fit(data, ties, engine, penalty)
    warn_unresolved(opt, "human tie model")
    E = np.zeros((N + free, X.shape[1] + free))
    E[:N, : N - 1] = centering_basis(N)
    if free:
        E[N, -1] = 1.0
    U, _ = family_glm_influence(data, ties, X, opt.x, 1.0 / tie_totals(data)[1], E)
    blocks = {"scores": slice(0, N)} | ({"log_nu": slice(N, N + 1)} if free else {})
    lin = U.linearization("the human tie-model scores", blocks, tie_labels=(data.human_judge,) if free else ())
    s = centering_basis(N) @ opt.x[: N - 1]
    lh = float(opt.x[-1]) if free else -np.inf
    return Estimate(s=s, log_nu=tie_log_nu([data.human_judge], np.array([lh])),
                    lambda_=0.0, loss_human=tie_human_loss(ties, s, lh, data), converged=opt.resolved, grad_norm=opt.grad_norm,
                    linearization=(lin,))


def _judges(data: Comparisons, ties: str, engine: FamilyOptimizers, seed: int | None, backend: str | None,
            penalty: str | None) -> Estimate:
    """Each judge's order-effect tie model (Davidson-Beaver), one GLM per judge; linearized jointly and judge by judge."""
    N, K = data.N, data.K
    T = centering_basis(N)
    cells = Cells.stack(data, 1.0, 0.0, ties=True)
    parts = [cells.select(cells.g == k) for k in range(K)]
    designs = [centered_design(c.i, c.j, N, c.a) for c in parts]
    free = np.array([has_tie_parameter(ties, c.counts) for c in parts])
    if engine.btl is None:
        opts = [glm(ties, c.counts, X, weight=1.0 / float(c.n.sum()), penalty=penalty) for c, X in zip(parts, designs)]
        for k, o in enumerate(opts):
            warn_unresolved(o, f"judge {data.judges[k]!r} tie model")
        xs = [o.x for o in opts]
        converged, grad_norm = all(o.resolved for o in opts), max(o.grad_norm for o in opts)
    else:
        table = data.cell_table("llm", ties=True)
        f = engine.btl(table, N=N, groups=K, ties=ties, log_nu0=tie_log_nu_start(ties, table, K),
                       seed=seed, backend=backend, penalty=penalty)
        if not f.converged:
            warnings.warn(ConvergenceWarning(f"judges' tie model: optimizer did not converge ({f.message})",
                                             "not converged"), stacklevel=3)
        # the centered chart s = T beta (beta: the first N - 1 scores); a judge without ties is binary (nu = 0)
        xs = [np.concatenate([f.S[k, : N - 1], [f.b[k]], [f.log_nu[k]] if free[k] else []]) for k in range(K)]
        converged, grad_norm = f.converged, f.grad_norm
    idx = np.flatnonzero(free)
    q = N + K + idx.size
    joint, own = [], []
    for k, (c, X, x) in enumerate(zip(parts, designs, xs)):
        E = np.zeros((q + N, X.shape[1] + free[k]))
        E[:N, : N - 1] = T / K
        E[N + k, N - 1] = 1.0
        if free[k]:
            E[N + K + int(np.searchsorted(idx, k)), N] = 1.0
        E[q:, : N - 1] = T
        U, _ = family_glm_influence(data, ties, X, x, 1.0 / float(c.n.sum()), E, cells=c)
        joint.append(OutcomeInfluence(U.J2, U.A[:q], U.st, U.rec))
        own.append(OutcomeInfluence(U.J2, U.A[q:], U.st, U.rec).linearization(
            f"the scores of judge {data.judges[k]!r}", {"judge_scores": slice(0, N)}))
    blocks = {"scores": slice(0, N), "b": slice(N, N + K)} | ({"log_nu": slice(N + K, q)} if idx.size else {})
    lin = stack_outcome_influence(joint).linearization("the mean judge scores, position effects and tie parameters", blocks,
                                                   tie_labels=tuple(data.judges[int(k)] for k in idx))
    S = np.array([T @ x[: N - 1] for x in xs])
    return Estimate(s=S.mean(0), b=np.array([x[N - 1] for x in xs]), judge_scores=S,
                    log_nu=tie_log_nu(list(data.judges), np.array([x[-1] if fr else -np.inf for x, fr in zip(xs, free)])),
                    lambda_=np.nan, loss_human=np.nan, converged=converged, grad_norm=grad_norm,
                    linearization=(lin, *own))


def fit_ties(data: Comparisons, method: str, *, ties: str = "davidson", seed: int | None = None,
             backend: str | None = None, engine: FamilyOptimizers | None = None, penalty: str | None = None) -> Estimate:
    """Tie-model MLE of ``human`` or ``judges`` with the covariance of any meat (see the module docstring).

    The human model of eq. human-only-estimator or each judge's order-effect model
    (eq. binomial-model-llm) with ties.  ``engine`` (default numpy's) optimizes the people's
    model (``engine.human``) and the judges' (``engine.btl``, Stan's ``judges.stan``, when
    given; else the GLM solver judge by judge); every covariance is numpy's at the optimum.
    ``penalty="firth"`` (numpy) gives the Firth estimates of these GLMs
    (:class:`~pydial.model.penalty.TieFirthPenalty`), with the unpenalized information as
    the bread, as for the binary fits (:mod:`pydial.model.penalty`).

    Returns
    -------
    Estimate
        With the log tie parameters by judge (the result's ``tie_parameters``: ``nu, se,
        ci_low, ci_high``, interval on the log scale) and the linearization that gives
        every standard error (:func:`~pydial.estimation.results.build_result`).
    """
    if method not in ("human", "judges"):
        raise ArgumentError(f"fit_ties fits the methods 'human' and 'judges', not {method!r}; the DIAL methods "
                            "with ties are pydial.fit(..., ties=...) (pydial.estimation.steps)")
    engine = NUMPY_FAMILY if engine is None else engine
    if method == "human":
        return _human(data, ties, engine, penalty)
    return _judges(data, ties, engine, seed, backend, penalty)
