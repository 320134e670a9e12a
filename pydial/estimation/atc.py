"""The isotonic step of the AtC baseline (App. related-comparison).

AtC orders the items by the human BTL scores and calibrates the position-debiased LLM
consensus to that order by isotonic regression.  :func:`atc_scores` is that step,
shared by the binary fit (:func:`pydial.fit` with ``method="atc"``) and its tie
version (:func:`pydial.estimation.tie_baselines.fit_atc_ties`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["atc_scores"]


def atc_scores(base: np.ndarray, human: np.ndarray, items: Any) -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame]:
    """AtC's scores (App. related-comparison), with the score table and covariance.

    ``base`` (the anchored consensus) is isotonic-regressed on the order of the human
    BTL scores ``human``, centered; returned with the score table and covariance (no
    standard errors: the isotonic step has no linearization).
    """
    from scipy.optimize import isotonic_regression

    order = np.argsort(-human, kind="stable")
    s = np.empty(base.size)
    s[order] = isotonic_regression(base[order], increasing=False).x
    s -= s.mean()
    scores = pd.DataFrame({"score": s, "se": np.nan, "ci_low": np.nan, "ci_high": np.nan},
                          index=pd.Index(items, name="item"))
    cov = pd.DataFrame(np.full((s.size, s.size), np.nan), index=scores.index, columns=scores.index)
    return s, scores, cov
