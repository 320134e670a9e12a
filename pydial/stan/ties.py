r"""Tie models through Stan's optimizer: ``pydial.fit(..., ties="davidson", engine="stan")``.

Davidson's (1970) model for the people (``method="human"``) and the Davidson-Beaver
(1977) model with judge-specific order effects for the LLM judges
(``method="judges"``), both from ``judges.stan``: for a cell with
``x = (s_i - s_j + a b) / 2``,

.. math:: (P(i), P(j), P(\mathrm{tie})) = \mathrm{softmax}(x, -x, \log\nu),

so that given a decisive outcome ``logit P(i) = s_i - s_j + a b`` (eq.
binomial-model-llm) and ``nu -> 0`` removes the ties.  The tie judgments that the
binary models exclude are used here.  Standard errors are model-based: the inverse
observed information of the Stan log density at the optimum (central differences
of Stan's exact gradient), mapped to the centered scores and, for ``nu``, by the
delta method on ``log nu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..data import Comparisons
from ..exceptions import DataError
from .backend import compile_model
from .standata import CellTable, helmert_basis, human_cell_table, judges_data, llm_cell_table, split_unconstrained

TIE_MODELS: tuple[str, ...] = ("davidson",)
TIE_METHODS: tuple[str, ...] = ("human", "judges")


def _observed_information(model: Any, d: dict, u: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """``-d^2 log p / du^2`` by central differences of the exact gradient."""
    P = u.size
    H = np.empty((P, P))
    for t in range(P):
        e = np.zeros(P)
        e[t] = h
        H[:, t] = (model.grad_log_prob(d, u + e) - model.grad_log_prob(d, u - e)) / (2 * h)
    return -0.5 * (H + H.T)


def fit_ties(data: Comparisons, method: str, common: dict[str, Any], *, seed: int | None = None) -> Any:
    """Davidson / Davidson-Beaver MLE with model-based standard errors (see the module docstring).

    Returns a :class:`pydial.results.DialResult` whose ``tie_parameters`` is a
    DataFrame by judge: ``nu, se, ci_low, ci_high`` (interval on the log scale).
    """
    from ..estimators import _score_frame
    from ..inference import wald_table
    from ..likelihood import human_loss
    from ..results import DialResult

    if method not in TIE_METHODS:
        raise NotImplementedError(f"ties='davidson' is available for methods {TIE_METHODS}, not {method!r}")
    if common["cov_type"] != "fisher":
        raise ValueError("ties='davidson' gives model-based (cov='fisher') standard errors only, "
                         f"got cov={common['cov_type']!r}")
    N, level = data.N, common["level"]
    if method == "human":
        H = human_cell_table(data, ties=True)
        if len(H) == 0:
            raise DataError(f"no human comparisons (judge {data.human_judge!r}) for the Davidson model")
        cells = CellTable(np.zeros_like(H.judge), H.i, H.j, np.zeros_like(H.a), H.wins_i, H.wins_j, H.ties)
        G, names, order_judges = 1, [data.human_judge], ()
    else:
        cells = llm_cell_table(data, ties=True)
        G, names, order_judges = data.K, list(data.judges), range(data.K)
    d = judges_data(cells, N=N, G=G, order_judges=order_judges, tie_judges=range(G), flat=True, log_lik=False)
    model = compile_model("judges")
    P = G * (N - 1) + len(order_judges) + G
    u0 = np.zeros(P)
    u0[-G:] = np.log(np.maximum(cells.ties.sum(), 0.5) / max(cells.counts.sum(), 1))
    res = model.optimize(d, u0, seed=seed)
    if not np.isfinite(res.log_prob):
        raise FloatingPointError("the tie model's log density is not finite at the optimum")
    info = _observed_information(model, d, res.u)
    cov_u = np.linalg.pinv(info, hermitian=True)
    parts = split_unconstrained("judges", d, res.u)
    Q = helmert_basis(N)
    S = parts["s_raw"].reshape(G, N - 1) @ Q.T
    blocks = G * (N - 1)
    cov_s = [Q @ cov_u[g * (N - 1):(g + 1) * (N - 1), g * (N - 1):(g + 1) * (N - 1)] @ Q.T for g in range(G)]
    lognu = np.atleast_1d(parts["log_nu"])
    se_lognu = np.sqrt(np.diag(cov_u)[-G:])
    zq = norm.ppf(0.5 + level / 2)
    nu = np.exp(lognu)
    ties = pd.DataFrame({"nu": nu, "se": nu * se_lognu, "ci_low": np.exp(lognu - zq * se_lognu),
                         "ci_high": np.exp(lognu + zq * se_lognu)}, index=pd.Index(names, name="judge"))
    if method == "human":
        s, C = S[0], cov_s[0]
        pos = judge_scores = None
        loss = human_loss(s, data.human)
    else:
        s, C = S.mean(0), sum(cov_s) / G**2  # the judges' likelihoods are independent
        b = np.atleast_1d(parts["b"])
        Cb = cov_u[blocks:blocks + G, blocks:blocks + G]
        pos = wald_table(b, Cb, names, level, "b")
        pos.index.name = "judge"
        pos.attrs["cov"] = Cb
        judge_scores = pd.DataFrame(S, index=pd.Index(names, name="judge"), columns=pd.Index(data.items, name="item"))
        loss = np.nan
    scores, cov = _score_frame(s, C, data.items, level)
    out = DialResult(**common, scores=scores, cov=cov, position_effects=pos, judge_scores=judge_scores, structure=None,
                     calibration_coef=None, lambda_=0.0 if method == "human" else np.inf, converged=bool(res.converged),
                     grad_norm=float(res.grad_norm), loss_human=loss,
                     details={"stan": res, "ties": "davidson", "information": info})
    out.tie_parameters = ties
    return out
