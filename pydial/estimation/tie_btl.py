r"""Tie models of the people and the judges: ``pydial.fit(..., ties="davidson" | "rao-kupper")``, either engine.

Davidson's (1970) model (or Rao and Kupper's, 1967) for the people
(``method="human"``) and the same with judge-specific order effects for the LLM
judges (``method="judges"``, Davidson-Beaver 1977); the cell likelihoods are those
of :mod:`pydial.model.families` (``tie_model`` 1 and 2 of
``stan/include/paired_likelihoods.stan``).  Given a decisive outcome the
Davidson model is eq. binomial-model-llm; ``nu -> 0`` removes the ties.  The tie
judgments that the binary models exclude are used here.  The optimum comes from
numpy (Newton on the exact derivatives, judge by judge) or from Stan
(:func:`pydial.stan.ties.stan_tie_btl`, ``judges.stan``); the standard errors are
model-based: the inverse observed information, computed exactly by numpy from the
per-cell derivatives of :mod:`pydial.model.families` at the optimum, mapped to the centered
scores and, for ``nu``, by the delta method on ``log nu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pydial.data.comparisons import CellTable, Comparisons
from pydial.estimation.engines import TieBTLFit, TieOptimizers
from pydial.exceptions import ArgumentError, DataError
from pydial.model.chart import helmert_basis
from pydial.model.families import fit_tie_judge, log_nu_start, tie_loglik

__all__ = ["TIE_MODELS", "TIE_METHODS", "tie_btl_cells", "judge_designs", "tie_log_nu_start", "fit_ties"]

TIE_MODELS: tuple[str, ...] = ("davidson", "rao-kupper")
"""The tie models of ``pydial.fit(..., ties=...)``."""

TIE_METHODS: tuple[str, ...] = ("human", "judges", "pooled", "dial-anc", "dial-ada", "dial-nopos", "atc")
"""Methods that take ``ties=``: ``human`` and ``judges`` (this module), the structured DIAL
methods (:mod:`pydial.estimation.tie_fits`) and the baselines ``pooled`` and ``atc``
(:mod:`pydial.estimation.tie_baselines`)."""


def tie_btl_cells(data: Comparisons, method: str) -> tuple[CellTable, list[str], bool]:
    """Return the cells of the tie model of ``method``, the names of its groups and the order switch.

    ``"human"``: the people's cells given to group 0, no order effect; ``"judges"``: the
    LLM cells of judges ``0..K-1`` with order effects.

    Raises
    ------
    DataError
        ``"human"`` without human comparisons.
    """
    if method == "human":
        H = data.cell_table("human", ties=True)
        if len(H) == 0:
            raise DataError(f"no human comparisons (judge {data.human_judge!r}) for the tie model")
        return H.with_judge(0), [data.human_judge], False
    return data.cell_table("llm", ties=True), list(data.judges), True


def judge_designs(cells: CellTable, G: int, N: int, order: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group ``g < G``: the cell counts ``(m, 3)`` and the design ``X`` with ``eta = X (z, b)``.

    The scores are ``s = Q_N z`` in the Helmert basis (:func:`pydial.model.chart.helmert_basis`), the
    coordinates of ``judges.stan``; the order column ``a`` is appended when ``order``.
    """
    Q = helmert_basis(N)
    out = []
    for g in range(G):
        m = cells.judge == g
        X = Q[cells.i[m]] - Q[cells.j[m]]
        if order:
            X = np.column_stack([X, cells.a[m].astype(float)])
        out.append((cells.counts[m], X))
    return out


def tie_log_nu_start(ties: str, cells: CellTable, G: int) -> np.ndarray:
    """Return the starting ``log nu`` of groups ``0..G-1`` from their tie rates (:func:`pydial.model.families.log_nu_start`)."""
    return np.array([log_nu_start(ties, cells.counts[cells.judge == g]) for g in range(G)], float)


def _numpy_tie_btl(ties: str, designs: list[tuple[np.ndarray, np.ndarray]], log_nu0: np.ndarray, N: int,
                   order: bool) -> TieBTLFit:
    """Newton's method on the exact derivatives of :func:`pydial.model.families.tie_loglik`, group by group."""
    Q = helmert_basis(N)
    fits = [fit_tie_judge(ties, c, X, np.append(np.zeros(X.shape[1]), log_nu0[g])) for g, (c, X) in enumerate(designs)]
    G = len(designs)
    S = np.array([Q @ f[0][: N - 1] for f in fits])
    b = np.array([f[0][N - 1] for f in fits]) if order else np.zeros(G)
    return TieBTLFit(S, b, np.array([f[0][-1] for f in fits]), all(f[3] for f in fits), np.nan, "Newton (numpy)")


def fit_ties(data: Comparisons, method: str, common: dict[str, Any], *, ties: str = "davidson",
             seed: int | None = None, backend: str | None = None, engine: TieOptimizers | None = None) -> Any:
    """Tie-model MLE with model-based standard errors (see the module docstring).

    The human model of eq. human-only-estimator or each judge's order-effect model
    (eq. binomial-model-llm) with ties.  ``engine.btl`` (Stan's: ``judges.stan``) optimizes when given, else
    Newton's method on the exact derivatives of
    :func:`pydial.model.families.tie_loglik`, judge by judge; the standard errors are the same
    function of the optimum in both.

    Returns
    -------
    DialResult
        With ``tie_parameters``: a DataFrame by judge with ``nu, se, ci_low, ci_high``
        (interval on the log scale).
    """
    from pydial.estimation.results import DialResult
    from pydial.inference.linearization import position_effect_tables, score_tables, tie_table
    from pydial.model.likelihood import human_loss

    if ties not in TIE_MODELS:
        raise ArgumentError(f"ties must be None or one of {TIE_MODELS}, got {ties!r}")
    if method not in ("human", "judges"):
        raise NotImplementedError(f"fit_ties fits the methods 'human' and 'judges', not {method!r}; the DIAL methods "
                                  "with ties are pydial.fit(..., ties=...) (pydial.estimation.tie_fits)")
    if common["cov_type"] != "fisher":
        raise ArgumentError(f"ties={ties!r} gives model-based (cov_type='fisher') standard errors only, "
                         f"got cov={common['cov_type']!r}")
    N, level = data.N, common["level"]
    Q = helmert_basis(N)
    cells, names, order = tie_btl_cells(data, method)
    G = len(names)
    designs = judge_designs(cells, G, N, order)
    lognu0 = tie_log_nu_start(ties, cells, G)
    if engine is None or engine.btl is None:
        f = _numpy_tie_btl(ties, designs, lognu0, N, order)
    else:
        f = engine.btl(cells, N=N, groups=G, human=(method == "human"), ties=ties, log_nu0=lognu0, seed=seed,
                       backend=backend)
    S, b, lognu, converged = f.S, f.b, f.log_nu, f.converged
    thetas = [np.concatenate([Q.T @ S[g], [b[g]] if order else [], [lognu[g]]]) for g in range(G)]
    info = [-tie_loglik(ties, c, X, th)[2] for (c, X), th in zip(designs, thetas)]
    # a group without ties has the boundary MLE nu = 0 (pydial.model.likelihood.tie_groups): its cells are binary and
    # its log nu (driven towards -inf by the optimizer) is not a parameter of the covariance
    free = np.array([c[:, 2].sum() > 0 for c, _ in designs])
    covs = []
    for info_g, fr in zip(info, free):
        C = np.full(info_g.shape, np.nan)
        k = info_g.shape[0] if fr else info_g.shape[0] - 1
        C[:k, :k] = np.linalg.pinv(info_g[:k, :k], hermitian=True)
        covs.append(C)
    cov_s = [Q @ C[: N - 1, : N - 1] @ Q.T for C in covs]
    idx = np.flatnonzero(free)
    tie_tab = tie_table(names, np.arange(G), idx, lognu[idx], np.array([covs[g][-1, -1] for g in idx]), level, ties)
    if method == "human":
        s, C = S[0], cov_s[0]
        pos = pos_cov = judge_scores = None
        loss = human_loss(s, data.human)
    else:
        s, C = S.mean(0), sum(cov_s) / G**2  # the judges' likelihoods are independent
        Cb = np.diag([Cg[N - 1, N - 1] for Cg in covs])
        pos, pos_cov = position_effect_tables(b, Cb, names, level)
        judge_scores = pd.DataFrame(S, index=pd.Index(names, name="judge"), columns=pd.Index(data.items, name="item"))
        loss = np.nan
    scores, cov = score_tables(s, C, data.items, level)
    out = DialResult(**common, scores=scores, cov=cov, position_effects=pos, position_effects_cov=pos_cov,
                     judge_scores=judge_scores, structure=None,
                     calibration_coef=None, lambda_=0.0 if method == "human" else np.nan, converged=converged,
                     grad_norm=f.grad_norm, loss_human=loss,
                     status="ok" if converged else "not converged",
                     problems=() if converged else (f"tie model optimizer: {f.message}",))
    out.tie_parameters = tie_tab
    return out
