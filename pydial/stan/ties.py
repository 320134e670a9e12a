r"""Tie models through Stan's optimizer: ``pydial.fit(..., ties="davidson" | "rao-kupper", engine="stan")``.

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
from scipy.stats import norm

from ..data import Comparisons
from ..exceptions import DataError
from ..ties import tie_cell
from .backend import compile_model
from .standata import CellTable, empty_cells, helmert_basis, human_cell_table, judges_data, llm_cell_table, tie_start

TIE_MODELS: tuple[str, ...] = ("davidson", "rao-kupper")
TIE_METHODS: tuple[str, ...] = ("human", "judges")


def _observed_information(cells: CellTable, ties: str, S: np.ndarray, b: np.ndarray, log_nu: np.ndarray,
                          order: bool) -> list[np.ndarray]:
    """Per judge, ``-d^2 log L`` in ``(score coordinates of Q_N, b (if order), log nu)``, exact (pydial.ties)."""
    N = S.shape[1]
    Q = helmert_basis(N)
    fn = tie_cell(ties)
    out = []
    for g in range(S.shape[0]):
        m = cells.judge == g
        i, j, a = cells.i[m], cells.j[m], cells.a[m].astype(float)
        eta = S[g, i] - S[g, j] + a * b[g]
        d = fn(cells.counts[m], eta, log_nu[g])
        X = Q[i] - Q[j]
        if order:
            X = np.column_stack([X, a])
        P = X.shape[1] + 1
        H = np.zeros((P, P))
        H[:-1, :-1] = X.T @ (d.d_eta_eta[:, None] * X)
        H[:-1, -1] = H[-1, :-1] = X.T @ d.d_eta_l
        H[-1, -1] = d.d_l_l.sum()
        out.append(-H)
    return out


def fit_ties(data: Comparisons, method: str, common: dict[str, Any], *, ties: str = "davidson",
             seed: int | None = None, backend: str | None = None) -> Any:
    """Tie-model MLE with model-based standard errors (see the module docstring).

    Returns a :class:`pydial.results.DialResult` whose ``tie_parameters`` is a
    DataFrame by judge: ``nu, se, ci_low, ci_high`` (interval on the log scale).
    """
    from ..estimators import _score_frame
    from ..inference import wald_table
    from ..likelihood import human_loss
    from ..results import DialResult

    if ties not in TIE_MODELS:
        raise ValueError(f"ties must be None or one of {TIE_MODELS}, got {ties!r}")
    if method not in TIE_METHODS:
        raise NotImplementedError(f"ties={ties!r} is available for methods {TIE_METHODS}, not {method!r}")
    if common["cov_type"] != "fisher":
        raise ValueError(f"ties={ties!r} gives model-based (cov='fisher') standard errors only, "
                         f"got cov={common['cov_type']!r}")
    N, level = data.N, common["level"]
    Q = helmert_basis(N)
    model = compile_model("judges", backend=backend)
    if method == "human":
        H = human_cell_table(data, ties=True)
        if len(H) == 0:
            raise DataError(f"no human comparisons (judge {data.human_judge!r}) for the tie model")
        d = judges_data(empty_cells(), H, N=N, K=0, order=False, ties=ties, flat=True, log_lik=False)
        cells = CellTable(np.zeros_like(H.judge), H.i, H.j, H.a, H.wins_i, H.wins_j, H.ties)
        names, order = [data.human_judge], False
        init = {"sH_raw": np.zeros(N - 1), "log_nu": tie_start(d)}
    else:
        cells = llm_cell_table(data, ties=True)
        d = judges_data(cells, None, N=N, K=data.K, order=True, ties=ties, flat=True, log_lik=False)
        names, order = list(data.judges), True
        init = {"s_raw": np.zeros((data.K, N - 1)), "b": np.zeros(data.K), "log_nu": tie_start(d)}
    G = len(names)
    res = model.optimize(d, model.unconstrain(d, init), seed=seed)
    if not np.isfinite(res.log_prob):
        raise FloatingPointError("the tie model's log density is not finite at the optimum")
    parts = model.constrain(d, res.u, include_tparams=False)
    if method == "human":
        S = (Q @ np.asarray(parts["sH_raw"], float))[None, :]
        b = np.zeros(1)
    else:
        S = np.asarray(parts["s_raw"], float).reshape(G, N - 1) @ Q.T
        b = np.asarray(parts["b"], float).reshape(-1)
    lognu = np.asarray(parts["log_nu"], float).reshape(-1)
    info = _observed_information(cells, ties, S, b, lognu, order)
    covs = [np.linalg.pinv(I, hermitian=True) for I in info]
    cov_s = [Q @ C[: N - 1, : N - 1] @ Q.T for C in covs]
    se_lognu = np.sqrt([C[-1, -1] for C in covs])
    zq = norm.ppf(0.5 + level / 2)
    nu = np.exp(lognu)
    tie_table = pd.DataFrame({"nu": nu, "se": nu * se_lognu, "ci_low": np.exp(lognu - zq * se_lognu),
                              "ci_high": np.exp(lognu + zq * se_lognu)}, index=pd.Index(names, name="judge"))
    tie_table.attrs["model"] = ties
    if method == "human":
        s, C = S[0], cov_s[0]
        pos = judge_scores = None
        loss = human_loss(s, data.human)
    else:
        s, C = S.mean(0), sum(cov_s) / G**2  # the judges' likelihoods are independent
        Cb = np.diag([Cg[N - 1, N - 1] for Cg in covs])
        pos = wald_table(b, Cb, names, level, "b")
        pos.index.name = "judge"
        pos.attrs["cov"] = Cb
        judge_scores = pd.DataFrame(S, index=pd.Index(names, name="judge"), columns=pd.Index(data.items, name="item"))
        loss = np.nan
    scores, cov = _score_frame(s, C, data.items, level)
    out = DialResult(**common, scores=scores, cov=cov, position_effects=pos, judge_scores=judge_scores, structure=None,
                     calibration_coef=None, lambda_=0.0 if method == "human" else np.inf, converged=bool(res.converged),
                     grad_norm=float(res.grad_norm), loss_human=loss,
                     details={"stan": res, "ties": ties, "information": info},
                     status="ok" if res.converged else "not converged",
                     problems=() if res.converged else (f"Stan optimizer: {res.message}; max|grad| = {res.grad_norm:.2e}",))
    out.tie_parameters = tie_table
    return out
