r"""Log-likelihoods, parameter counts and sample sizes of a fit: what model comparison needs.

Every likelihood fit reports the log-likelihood of the judgments it used (:class:`FitStats`,
``DialResult.llf``), the number of its free parameters after the gauge (``df_model``) and
the judgments used (``nobs``), so that ``aic = -2 llf + 2 df_model`` and
``bic = -2 llf + log(nobs) df_model`` compare fits of the same judgments.

The log-likelihood is the one of the judgments taken one at a time (statsmodels' GLM on the
long table of Bernoulli rows): for the binary family
:math:`\sum_t y_t \log p_t + (1 - y_t) \log(1 - p_t)` over the decisive judgments, without
binomial coefficients; for a tie family (Davidson, Rao-Kupper) the categorical log
probability of each judgment's outcome (win, loss or tie), summed
(:mod:`pydial.model.families`: the cell kernels without their multinomial coefficients).

Parameter counts follow the paper's parameterization:

==================== ======================================================================
method               ``df_model``
==================== ======================================================================
human                ``N - 1`` scores (centered), ``+ p_H`` covariate effects, ``+ 1`` for
                     ``nu_H`` when the people's judgments hold a tie
judges               ``K (N - 1)`` scores and ``K`` order effects, ``+`` each judge's
                     covariate effects and tie parameter
DIAL (structured)    ``(r + 1)(K + N - r - 2) + K`` for ``S = gamma mu^T + U V^T`` and ``b``
                     (Sec. "Structured representation across LLM judges": the reduced chart
                     ``A B^T`` with ``A^T 1 = K e_1``, ``B^T 1 = 0`` has
                     ``(r + 1)(K - 1) + (r + 1)(N - 1)`` coordinates, less the ``r (r + 1)``
                     gauge invariances of App. "Reduced score-space representation"), no
                     ``K`` without order effects (``dial-nopos``), ``+ d`` calibration
                     coefficients (1 for ``mu``, ``r + 1`` for ``W``), ``+`` the free
                     covariate effects and tie parameters
pooled               ``N - 1`` pooled scores ``+ 1`` scale ``c`` (``+ beta_L, beta_H, nu_L, nu_H``)
==================== ======================================================================

The staged and two-stage fits (``dial-anc``, ``pooled``, the anchored endpoint of
``dial-ada``) maximize their likelihoods stage by stage; their ``llf`` is the sum of the
stage log-likelihoods at the estimate, ``l_LLM`` of the LLM-only fit plus ``l_H`` of the
calibration, which is the log-likelihood of the joint model at that (not maximizing) point.
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

__all__ = ["FitStats", "cell_log_likelihood", "judges_stats", "structured_log_likelihood", "judgment_counts"]


@dataclass(frozen=True)
class FitStats:
    r"""The log-likelihood of a fit and its parameter count (see ``help(pydial.estimation.fitstats)``).

    Attributes
    ----------
    llf : float
        Log-likelihood of the judgments the fit used, at the estimate (NaN when the fit is not a
        likelihood fit, e.g. AtC's isotonic scores).
    df_model : int or None
        Free parameters after the gauge (``None`` with ``llf``: no likelihood).
    llf_human : float
        The people's log-likelihood at the reported scores (NaN when no human judgment is used).
    objective : float
        The weighted criterion :math:`Q_\lambda = \ell_H + \lambda \ell_L` (eq. weighted-loss,
        normalized losses) at the estimate, for ``dial-ada`` / ``dial-nopos``: not a
        log-likelihood.  NaN for the other methods.
    """

    llf: float
    df_model: int | None
    llf_human: float = np.nan
    objective: float = np.nan


def cell_log_likelihood(family: Family, table: CellTable, eta: np.ndarray, log_nu: np.ndarray | float) -> float:
    """Return the log-likelihood of the judgments of ``table`` at linear predictors ``eta`` (one per cell).

    ``log_nu``: the log tie parameter of each cell (``-inf``: the binary model, ``nu = 0``).
    The kernels of :mod:`pydial.model.families` summed: the per-judgment log probabilities.
    """
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
    """Return the log-likelihood of the LLM judgments under each judge's ``(S_k, b_k, beta_k, nu_k)``.

    The judges' model of eq. binomial-model-llm, with ``df_model`` free parameters.
    """
    t = data.cell_table("llm", with_ties=not family.is_binary)
    g = t.judge
    eta = S[g, t.i] - S[g, t.j] + t.a * b[g]
    if beta is not None and t.z is not None:
        eta = eta + np.einsum("cp,cp->c", t.z, beta[g])
    return FitStats(cell_log_likelihood(family, t, eta, log_nu[g]), df_model)


def structured_log_likelihood(data: Comparisons, family: Family, chart: Chart, x: np.ndarray, free: np.ndarray,
                              which: str) -> float:
    """Return the log-likelihood of the ``which`` (``"llm"`` or ``"human"``) judgments at the structured fit ``x``.

    ``x = (theta, log nu)`` of ``chart`` with the free tie groups ``free``
    (:class:`~pydial.model.likelihood.Objective`, unit weights).
    """
    w_llm, w_human = (1.0, 0.0) if which == "llm" else (0.0, 1.0)
    cells = Cells.stack(data, w_llm, w_human, with_ties=not family.is_binary)
    return -Objective(chart, cells, ties=family, free=free if not family.is_binary else None).value(x)


def _kinds_by_judge(data: Comparisons) -> np.ndarray:
    """Return the judgments of each judge (LLM judges, then people) by kind, one pass over the rows.

    Rows: decisive, tie, both bad (self-comparisons excluded from the three), self-comparisons.
    """
    f = data.frame
    kind_of = np.zeros(max(I_WINS, J_WINS, TIE, BOTH_BAD) + 1, np.int64)
    kind_of[TIE], kind_of[BOTH_BAD] = 1, 2  # I_WINS and J_WINS are decisive (0)
    kind = kind_of[f["outcome"].to_numpy()]
    kind[f["self"].to_numpy(bool)] = 3
    weight = f["count"].to_numpy(float) if data.aggregated else None
    counts = np.bincount(f["k"].to_numpy() * 4 + kind, weights=weight, minlength=4 * (data.K + 1))
    return counts.reshape(data.K + 1, 4).T.astype(np.int64)


def judgment_counts(data: Comparisons, family: Family, method: str) -> tuple[pd.Series, pd.DataFrame]:
    """Return the judgments each judge contributed to the likelihood, and those left out by reason.

    The first is a Series indexed by judge (the LLM judges, then the human judge); the second a
    DataFrame indexed the same way with the columns ``ties`` (left out by the binary models;
    0 with a tie family), ``both_bad``, ``self_comparisons`` and ``not_used_by_method`` (the LLM
    judges' judgments for ``human``, the people's for ``judges``).  Per judge the two add up to
    every judgment of the data.
    """
    names = derived(data, ("judge index",), lambda: pd.Index(list(data.judges) + [data.human_judge], name="judge"))
    decisive, tie, both_bad, own = derived(data, ("judgments by judge and kind",), lambda: _kinds_by_judge(data))
    used = decisive + (tie if not family.is_binary else 0)
    unused = np.zeros(data.K + 1, np.int64)
    if method in ("human", "judges"):
        drop = np.arange(data.K) if method == "human" else np.array([data.K])
        unused[drop], used[drop] = used[drop], 0
    excluded = pd.DataFrame(np.column_stack([tie if family.is_binary else np.zeros_like(tie), both_bad, own, unused]),
                            index=names, columns=_EXCLUDED)
    return pd.Series(used, index=names, name="nobs"), excluded


_EXCLUDED = pd.Index(["ties", "both_bad", "self_comparisons", "not_used_by_method"])
"""The columns of :func:`judgment_counts`' judgments left out, by reason."""

