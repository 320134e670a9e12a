r"""Tie models of the people and the judges: ``pydial.fit(..., ties="davidson" | "rao-kupper")``, either engine.

Davidson's (1970) model (or Rao and Kupper's, 1967) for the people
(``method="human"``) and the same with judge-specific order effects for the LLM
judges (``method="judges"``, Davidson-Beaver 1977), both from ``judges.stan``;
the cell likelihoods are those of :mod:`pydial.ties` (``tie_model`` 1 and 2 of
``stan/include/paired_likelihoods.stan``).  Given a decisive outcome the
Davidson model is eq. binomial-model-llm; ``nu -> 0`` removes the ties.  The
tie judgments that the binary models exclude are used here.  Standard errors
are model-based: the inverse observed information, computed exactly by numpy
from the per-cell derivatives of :mod:`pydial.ties` at Stan's optimum, mapped
to the centered scores and, for ``nu``, by the delta method on ``log nu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..data import Comparisons
from ..exceptions import DataError
from ..ties import tie_loglik
from .backend import compile_model
from .standata import CellTable, empty_cells, helmert_basis, human_cell_table, judges_data, llm_cell_table, tie_start

TIE_MODELS: tuple[str, ...] = ("davidson", "rao-kupper")
TIE_METHODS: tuple[str, ...] = ("human", "judges", "pooled", "dial-anc", "dial-ada", "dial-nopos", "atc")
"""Methods that take ``ties=``: ``human`` and ``judges`` (this module), the structured DIAL
methods (:mod:`pydial.tie_fits`) and the baselines ``pooled`` (numpy engine) and ``atc``
(:mod:`pydial.tie_baselines`)."""


def _judge_designs(cells: CellTable, G: int, N: int, order: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per judge: the cell counts and the design ``X`` with ``eta = X (z, b)``, ``s = Q_N z`` (Helmert)."""
    Q = helmert_basis(N)
    out = []
    for g in range(G):
        m = cells.judge == g
        X = Q[cells.i[m]] - Q[cells.j[m]]
        if order:
            X = np.column_stack([X, cells.a[m].astype(float)])
        out.append((cells.counts[m], X))
    return out


def fit_ties(data: Comparisons, method: str, common: dict[str, Any], *, ties: str = "davidson",
             seed: int | None = None, backend: str | None = None) -> Any:
    """Tie-model MLE with model-based standard errors (see the module docstring): the human
    model of eq. human-only-estimator or each judge's order-effect model (eq. binomial-model-llm) with ties.

    ``common["engine"]``: ``"stan"`` optimizes with Stan (``judges.stan``),
    ``"numpy"`` by Newton's method on the exact derivatives of
    :func:`pydial.ties.tie_loglik`, judge by judge; the standard errors are
    the same function of the optimum in both.

    Returns a :class:`pydial.results.DialResult` whose ``tie_parameters`` is a
    DataFrame by judge: ``nu, se, ci_low, ci_high`` (interval on the log scale).
    """
    from ..inference import score_tables
    from ..inference import position_effect_tables
    from ..likelihood import human_loss
    from ..tie_fits import tie_table
    from ..results import DialResult

    if ties not in TIE_MODELS:
        raise ValueError(f"ties must be None or one of {TIE_MODELS}, got {ties!r}")
    if method not in ("human", "judges"):
        raise NotImplementedError(f"fit_ties fits the methods 'human' and 'judges', not {method!r}; the DIAL methods "
                                  "with ties are pydial.fit(..., ties=...) (pydial.tie_fits)")
    if common["cov_type"] != "fisher":
        raise ValueError(f"ties={ties!r} gives model-based (cov='fisher') standard errors only, "
                         f"got cov={common['cov_type']!r}")
    N, level = data.N, common["level"]
    Q = helmert_basis(N)
    if method == "human":
        H = human_cell_table(data, ties=True)
        if len(H) == 0:
            raise DataError(f"no human comparisons (judge {data.human_judge!r}) for the tie model")
        d = judges_data(empty_cells(), H, N=N, K=0, order=False, ties=ties, flat=True, log_lik=False)
        cells = CellTable(np.zeros_like(H.judge), H.i, H.j, H.a, H.wins_i, H.wins_j, H.ties)
        names, order = [data.human_judge], False
    else:
        cells = llm_cell_table(data, ties=True)
        d = judges_data(cells, None, N=N, K=data.K, order=True, ties=ties, flat=True, log_lik=False)
        names, order = list(data.judges), True
    G = len(names)
    designs = _judge_designs(cells, G, N, order)
    lognu0 = tie_start(d)
    if common["engine"] == "numpy":
        from ..ties import fit_tie_judge

        fits = [fit_tie_judge(ties, c, X, np.append(np.zeros(X.shape[1]), lognu0[g]))
                for g, (c, X) in enumerate(designs)]
        S = np.array([Q @ f[0][: N - 1] for f in fits])
        b = np.array([f[0][N - 1] for f in fits]) if order else np.zeros(G)
        lognu = np.array([f[0][-1] for f in fits])
        converged = all(f[3] for f in fits)
        opt: Any = None
        grad_norm, message = np.nan, "Newton (numpy)"
    else:
        model = compile_model("judges", backend=backend)
        if method == "human":
            init = {"sH_raw": np.zeros(N - 1), "log_nu": lognu0}
        else:
            init = {"s_raw": np.zeros((G, N - 1)), "b": np.zeros(G), "log_nu": lognu0}
        opt = model.optimize(d, model.unconstrain(d, init), seed=seed)
        if not np.isfinite(opt.log_prob):
            raise FloatingPointError("the tie model's log density is not finite at the optimum")
        parts = model.constrain(d, opt.u, include_tparams=False)
        if method == "human":
            S = (Q @ np.asarray(parts["sH_raw"], float))[None, :]
            b = np.zeros(1)
        else:
            S = np.asarray(parts["s_raw"], float).reshape(G, N - 1) @ Q.T
            b = np.asarray(parts["b"], float).reshape(-1)
        lognu = np.asarray(parts["log_nu"], float).reshape(-1)
        converged, grad_norm, message = bool(opt.converged), float(opt.grad_norm), opt.message
    thetas = [np.concatenate([Q.T @ S[g], [b[g]] if order else [], [lognu[g]]]) for g in range(G)]
    info = [-tie_loglik(ties, c, X, th)[2] for (c, X), th in zip(designs, thetas)]
    # a group without ties has the boundary MLE nu = 0 (pydial.likelihood.tie_groups): its cells are binary and
    # its log nu (driven towards -inf by the optimizer) is not a parameter of the covariance
    free = np.array([c[:, 2].sum() > 0 for c, _ in designs])
    covs = []
    for I, f in zip(info, free):
        C = np.full(I.shape, np.nan)
        k = I.shape[0] if f else I.shape[0] - 1
        C[:k, :k] = np.linalg.pinv(I[:k, :k], hermitian=True)
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
                     grad_norm=grad_norm, loss_human=loss,
                     status="ok" if converged else "not converged",
                     problems=() if converged else (f"tie model optimizer: {message}",))
    out.tie_parameters = tie_tab
    return out
