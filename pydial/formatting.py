"""Text formatting of statistics for tables, reports and printed summaries.

A p-value is never printed as ``0.0`` (:func:`format_pvalue`); where a tail probability underflows, format its
logarithm (``scipy.stats.norm.logsf``, ``chi2.logsf``) with :func:`format_pvalue_from_log`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import log_ndtr

__all__ = ["P_FLOOR", "ITEMS_LABEL", "format_pvalue", "format_pvalue_from_log", "pvalue_from_log", "wald_log_pvalue",
           "pvalue_texts", "display_table", "cov_label", "by_score"]

ITEMS_LABEL = "items, ordered by fitted score"
"""Axis label of every plot whose rows are items (they are in the order of :func:`by_score`)."""

P_FLOOR = 1e-300
"""p-values below this are printed as ``< 1e-300``."""

_LOG_FLOOR = math.log(P_FLOOR)


def format_pvalue(p: float) -> str:
    """Format a p-value with two significant digits (scientific below 0.001, ``"< 1e-300"`` below the floor, ``"nan"``).

    Examples
    --------
    >>> format_pvalue(3.14e-8), format_pvalue(0.0423), format_pvalue(0.0), format_pvalue(0.5)
    ('3.1e-08', '0.042', '< 1e-300', '0.5')
    """
    p = float(p)
    if math.isnan(p):
        return "nan"
    if p < P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.2g}"


def pvalue_from_log(logp: float) -> float:
    """Return the p-value ``exp(logp)``, capped at 1 (0.0 where it underflows, NaN for NaN)."""
    return float(min(math.exp(logp), 1.0)) if not math.isnan(logp) else math.nan


def format_pvalue_from_log(logp: float) -> str:
    """Format a p-value given by its natural logarithm, finite where ``p`` underflows (as :func:`format_pvalue`).

    Examples
    --------
    >>> from scipy.stats import norm
    >>> format_pvalue_from_log(float(norm.logsf(40.0)))
    '< 1e-300'
    >>> format_pvalue_from_log(float(norm.logsf(5.63)))
    '9.0e-09'
    """
    return f"< {P_FLOOR:.0e}" if float(logp) < _LOG_FLOOR else format_pvalue(pvalue_from_log(logp))  # NaN: "nan"


def wald_log_pvalue(z: float) -> float:
    """Return ``log 2 + log P(Z > |z|)``, the log two-sided Wald p-value of ``z`` (NaN for NaN)."""
    return float(math.log(2.0) + log_ndtr(-abs(float(z))))  # log P(|Z| > |z|)


def pvalue_texts(table: pd.DataFrame, column: str = "p_value") -> pd.Series:
    """Format a table's p-value ``column``, from its ``z`` column where ``p`` is 0 and ``z`` finite (:func:`wald_log_pvalue`)."""
    p = table[column].to_numpy(float)
    z = table["z"].to_numpy(float) if "z" in table else np.full(len(p), np.nan)
    return pd.Series([format_pvalue_from_log(wald_log_pvalue(zi)) if pi == 0 and np.isfinite(zi) else format_pvalue(pi)
                      for pi, zi in zip(p, z)], index=table.index, name=column)


def display_table(table: pd.DataFrame, pvalue_columns: tuple[str, ...] = ("p_value",)) -> pd.DataFrame:
    """Return a copy of ``table`` with its ``pvalue_columns`` as text (:func:`pvalue_texts`), other columns unchanged."""
    out = table.copy()
    for c in pvalue_columns:
        if c in out:
            out[c] = pvalue_texts(table, c)
    return out


_COV_LABELS = {
    "fisher": "model-based (Fisher information)",
    "binomial": "sandwich (binomial)",
    "cell": "sandwich (cell-clustered)",
    "record": "sandwich (record-clustered)",
}


def cov_label(cov_type: str | None, anchored_cov: str | None = None) -> str:
    """Name a covariance type in a few words for labels, e.g. ``"sandwich (cell-clustered)"``, with ``anchored_cov`` appended."""
    if cov_type is None:
        return "the fit's covariance"
    text = _COV_LABELS.get(str(cov_type), f"{cov_type} covariance")
    return f"{text}, {anchored_cov}" if anchored_cov else text


def by_score(table: pd.DataFrame, column: str = "score") -> pd.DataFrame:
    """Sort ``table`` by ``column`` descending (ties keep their order, NaN last): the one item order of every table and plot."""
    return table.sort_values(column, ascending=False, kind="mergesort", na_position="last")
