r"""Log-likelihoods, parameter counts and sample sizes of a fit: what model comparison needs.

``llf``: the judgments used one at a time (Bernoulli rows as statsmodels' GLM; a tie family's categorical
probabilities), for the staged fits the sum of the stage log-likelihoods.  ``df_model``, the free parameters
after the gauge:

* ``human``: ``N - 1`` scores, ``+ p_H`` covariate effects, ``+ 1`` for ``nu_H`` when the people tie;
* ``judges``: ``K (N - 1)`` scores and ``K`` order effects, ``+`` each judge's covariate effects and ``nu``;
* structured DIAL: ``(r + 1)(K + N - r - 2) + K`` for ``S`` and ``b`` (the reduced chart's
  ``(r + 1)(K + N - 2)`` coordinates less the ``r (r + 1)`` gauge; no ``K`` for ``dial-nopos``),
  ``+ d`` calibration coefficients, ``+`` the free covariate effects and tie parameters;
* ``pooled``: ``N - 1`` pooled scores ``+ 1`` scale ``c`` (``+ beta_L, beta_H, nu_L, nu_H``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pydial.cache import derived
from pydial.data.comparisons import BOTH_BAD, I_WINS, J_WINS, TIE, CellTable, Comparisons
from pydial.model.chart import Chart
from pydial.model.families import Family, binary_cell
from pydial.model.likelihood import Cells, Objective

__all__ = ["FitStats", "cell_log_likelihood", "judges_stats", "structured_log_likelihood", "judgment_counts", "EXCLUDED"]


@dataclass(frozen=True)
class FitStats:
    r"""The log-likelihood of a fit and its parameter count (see ``help(pydial.estimation.fitstats)``).

    Attributes
    ----------
    llf : float
        Log-likelihood of the judgments the fit used, at the estimate (NaN without a likelihood, e.g. AtC).
    df_model : int or None
        Free parameters after the gauge (``None`` with ``llf``: no likelihood).
    llf_human : float
        The people's log-likelihood at the reported scores (NaN when no human judgment is used).
    objective : float
        :math:`Q_\lambda = \ell_H + \lambda \ell_L` (eq. weighted-loss, normalized losses) at the estimate
        for ``dial-ada`` / ``dial-nopos``, not a log-likelihood; NaN for the other methods.
    """

    llf: float
    df_model: int | None
    llf_human: float = np.nan
    objective: float = np.nan


def cell_log_likelihood(family: Family, table: CellTable, eta: np.ndarray, log_nu: np.ndarray | float) -> float:
    """Log-likelihood of the judgments of ``table`` at predictors ``eta``; ``log_nu`` per cell (``-inf``: binary)."""
    cnt = table.counts.astype(float)
    eta = np.asarray(eta, float)
    lnu = np.broadcast_to(np.asarray(log_nu, float), eta.shape)
    tied = np.isfinite(lnu)
    total = float(binary_cell(cnt[~tied], eta[~tied]).value.sum())
    if tied.any():
        total += float(family.cell(cnt[tied], eta[tied], lnu[tied]).value.sum())
    return total


def judges_stats(data: Comparisons, family: Family, S: np.ndarray, b: np.ndarray, log_nu: np.ndarray,
                 beta: np.ndarray | None, df_model: int) -> FitStats:
    """Log-likelihood of the LLM judgments under each judge's ``(S_k, b_k, beta_k, nu_k)``, with ``df_model``."""
    t = data.cell_table("llm", with_ties=not family.is_binary)
    g = t.judge
    eta = S[g, t.i] - S[g, t.j] + t.a * b[g]
    if beta is not None and t.z is not None:
        eta = eta + np.einsum("cp,cp->c", t.z, beta[g])
    return FitStats(cell_log_likelihood(family, t, eta, log_nu[g]), df_model)


def structured_log_likelihood(data: Comparisons, family: Family, chart: Chart, x: np.ndarray, free: np.ndarray,
                              which: str) -> float:
    """Log-likelihood of the ``which`` (``"llm"``, ``"human"``) judgments at ``x = (theta, log nu)`` of ``chart``."""
    cells = Cells.stack(data, *((1.0, 0.0) if which == "llm" else (0.0, 1.0)), with_ties=not family.is_binary)
    return -Objective(chart, cells, ties=family, free=free if not family.is_binary else None).value(x)


def _kinds_by_judge(data: Comparisons) -> np.ndarray:
    """Judgments of each judge (LLM judges, then people) by kind: decisive, tie, both bad, self-comparison (rows)."""
    f = data.frame
    kind_of = np.zeros(max(I_WINS, J_WINS, TIE, BOTH_BAD) + 1, np.int64)
    kind_of[TIE], kind_of[BOTH_BAD] = 1, 2  # I_WINS and J_WINS are decisive (0)
    kind = kind_of[f["outcome"].to_numpy()]
    kind[f["self"].to_numpy(bool)] = 3
    weight = f["count"].to_numpy(float) if data.aggregated else None
    counts = np.bincount(f["k"].to_numpy() * 4 + kind, weights=weight, minlength=4 * (data.K + 1))
    return counts.reshape(data.K + 1, 4).T.astype(np.int64)


def judgment_counts(data: Comparisons, family: Family, method: str) -> tuple[pd.Index, np.ndarray, np.ndarray]:
    """Return the judges, the judgments each contributed to the likelihood, and those left out by reason (:data:`EXCLUDED`).

    Per judge the two add up to every judgment.  Cached per data set, method and binary or tie family: read-only.
    """
    def build() -> tuple[pd.Index, np.ndarray, np.ndarray]:
        names = derived(data, ("judge index",), lambda: pd.Index(list(data.judges) + [data.human_judge], name="judge"))
        decisive, tie, both_bad, own = derived(data, ("judgments by judge and kind",), lambda: _kinds_by_judge(data))
        used = decisive + (tie if not family.is_binary else 0)
        unused = np.zeros(data.K + 1, np.int64)
        if method in ("human", "judges"):
            drop = np.arange(data.K) if method == "human" else np.array([data.K])
            unused[drop], used[drop] = used[drop], 0
        excluded = np.column_stack([tie if family.is_binary else np.zeros_like(tie), both_bad, own, unused])
        used.flags.writeable = excluded.flags.writeable = False
        return names, used, excluded

    return derived(data, ("judgment counts", family.is_binary, method), build)


EXCLUDED = pd.Index(["ties", "both_bad", "self_comparisons", "not_used_by_method"])
"""The columns of :func:`judgment_counts`' judgments left out, by reason."""
