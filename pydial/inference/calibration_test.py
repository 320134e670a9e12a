r"""Calibration-space likelihood-ratio test and AIC endpoint comparison (Prop. calibration-test).

:math:`T = 2 n_H \{\ell_H(\hat s_\infty) - \ell_H(\hat s_0)\}` is asymptotically :math:`\chi^2_{N-1-d}`
under ``s_H = M c`` (eq. human-subspace-model); AIC prefers the anchored endpoint when ``T < 2 (N - 1 - d)``.
The human MLE :math:`\hat s_0` exists only when the human win graph is strongly connected, else the test is undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc

from pydial.data.comparisons import Comparisons
from pydial.formatting import format_pvalue
from pydial.model.cells import human_loss


@dataclass(frozen=True)
class CalibrationTest:
    """Result of the calibration LRT.

    Attributes
    ----------
    statistic : float
        ``T = 2 n_H {l_H(s_inf) - l_H(s_0)}`` (NaN when undefined).
    df : int
        ``N - 1 - d``.
    p_value : float
        ``P(chi2_df > T)`` (NaN when undefined).
    aic_prefers : str
        ``"anchored"`` when ``T < 2 df``, ``"unrestricted"`` otherwise, ``"undefined"``
        when the human MLE does not exist.
    defined : bool
        Whether the unrestricted human MLE exists.
    reason : str
        Why the test is undefined (empty otherwise).
    """

    statistic: float
    df: int
    p_value: float
    aic_prefers: str
    defined: bool
    reason: str = ""

    def __repr__(self) -> str:
        """Show the statistic, degrees of freedom, p-value and AIC's choice (or why undefined)."""
        if not self.defined:
            return f"CalibrationTest(undefined: {self.reason})"
        return (f"CalibrationTest(statistic={self.statistic:.4g}, df={self.df}, p_value={format_pvalue(self.p_value)}, "
                f"aic_prefers={self.aic_prefers!r})")


def calibration_test(data: Comparisons, s_anchored: np.ndarray, s_human: np.ndarray | None, d: int,
                     reason: str = "") -> CalibrationTest:
    """Compute the LRT of Prop. calibration-test from the two endpoint fits (``s_human`` None: no human MLE, ``reason``)."""
    return calibration_lrt(human_loss(s_anchored, data.human),
                           None if s_human is None else human_loss(s_human, data.human),
                           data.n_human, data.N - 1 - d, reason)


def calibration_lrt(loss_anchored: float, loss_human: float | None, n_human: int, df: int,
                    reason: str = "") -> CalibrationTest:
    """Return ``T = 2 n_H (l_H(anchored) - l_H(human-only))`` on ``df = N - 1 - d`` (Prop. calibration-test).

    Any human likelihood with the tie parameter free under both; ``loss_human`` None: no human-only MLE.
    """
    if loss_human is None:
        return CalibrationTest(np.nan, df, np.nan, "undefined", False, reason or "the human-only MLE does not exist")
    T = max(2.0 * n_human * (loss_anchored - loss_human), 0.0)  # the unrestricted fit nests the anchored one: round-off
    p = float(chdtrc(df, T)) if df > 0 else np.nan  # the chi-square survival function
    return CalibrationTest(float(T), df, p, "anchored" if T < 2 * df else "unrestricted", True)
