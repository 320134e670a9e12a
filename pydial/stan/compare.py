"""Sandwich (Wald) intervals next to posterior intervals at the same level.

DESIGN.md, Conventions: one level for everything, stated in every table; the
posterior intervals compared with sandwich intervals are *equal-tailed* at
that level (not arviz's default 94% HDI).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

__all__ = ["compare_intervals"]

COLUMNS = ("estimate", "se", "ci_low", "ci_high", "post_mean", "post_sd", "cred_low", "cred_high", "width_ratio",
           "shift_se", "level")


def _result_level(result: Any) -> float | None:
    lv = getattr(result, "level", None)
    if lv is None:
        scores = getattr(result, "scores", None)
        lv = getattr(scores, "attrs", {}).get("level") if scores is not None else None
    return None if lv is None else float(lv)


def _draws(idata: Any, var: str, dim: str) -> tuple[np.ndarray, list[str]] | None:
    post = idata.posterior
    if var not in post:
        return None
    da = post[var]
    if dim not in da.dims:
        return None
    da = da.transpose("chain", "draw", dim)
    x = np.asarray(da.values, dtype=float).reshape(-1, da.sizes[dim])
    return x, [str(v) for v in da[dim].values]


def _block(quantity: str, table: pd.DataFrame, est_col: str, draws: np.ndarray, names: list[str], level: float,
           same_level: bool) -> pd.DataFrame:
    missing = [str(n) for n in table.index if str(n) not in names]
    if missing:
        raise KeyError(f"{quantity}: {missing[:5]} of the frequentist table are not in the posterior coordinates")
    idx = [names.index(str(n)) for n in table.index]
    x = draws[:, idx]
    alpha = 1.0 - level
    est = table[est_col].to_numpy(float)
    se = table["se"].to_numpy(float)
    if same_level and {"ci_low", "ci_high"} <= set(table.columns):
        lo, hi = table["ci_low"].to_numpy(float), table["ci_high"].to_numpy(float)
    else:
        z = norm.ppf(1.0 - alpha / 2.0)
        lo, hi = est - z * se, est + z * se
    q_lo, q_hi = np.quantile(x, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    pm, ps = x.mean(axis=0), x.std(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        width = (q_hi - q_lo) / (hi - lo)
        shift = (pm - est) / se
    out = pd.DataFrame(
        {"estimate": est, "se": se, "ci_low": lo, "ci_high": hi, "post_mean": pm, "post_sd": ps, "cred_low": q_lo,
         "cred_high": q_hi, "width_ratio": width, "shift_se": shift, "level": level},
        index=pd.MultiIndex.from_arrays([[quantity] * len(table), [str(n) for n in table.index]],
                                        names=["quantity", "name"]),
    )
    return out


def compare_intervals(result: Any, idata: Any, level: float | None = None) -> pd.DataFrame:
    """Per item (and per judge for ``b``): sandwich interval next to the posterior interval.

    Parameters
    ----------
    result : DialResult-like
        A frequentist fit with ``scores`` (DataFrame indexed by item with columns
        ``score, se, ci_low, ci_high``), optionally ``position_effects``
        (indexed by judge with ``b, se, ci_low, ci_high``) and ``level``.
    idata : arviz.InferenceData
        From :func:`pydial.stan.posterior`; uses ``posterior.s_H`` (dim
        ``item``) and ``posterior.b`` (dim ``judge``) when present.
    level : float, optional
        Interval level; default the result's level (``result.level``), else
        0.95.  At another level than the result's, the Wald interval is
        recomputed as ``estimate -/+ z se``.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``(quantity, name)`` with ``quantity`` in ``{"score", "b"}``;
        columns ``estimate, se, ci_low, ci_high`` (sandwich / Wald),
        ``post_mean, post_sd, cred_low, cred_high`` (posterior; equal-tailed
        credible interval at the same level), ``width_ratio`` (credible width /
        Wald width), ``shift_se`` (``(post_mean - estimate) / se``: a large value
        flags a posterior that left the MLE, e.g. the consensus trap of
        DESIGN.md) and ``level``.  ``attrs["level"]`` and ``attrs["interval"]``
        state the level and the interval types.
    """
    r_level = _result_level(result)
    lv = float(level) if level is not None else (r_level if r_level is not None else 0.95)
    if not 0.0 < lv < 1.0:
        raise ValueError(f"level ({lv}) must be in the open interval (0, 1)")
    same = r_level is not None and abs(lv - r_level) < 1e-12
    blocks = []
    scores = getattr(result, "scores", None)
    if scores is not None:
        dr = _draws(idata, "s_H", "item")
        if dr is None:
            raise KeyError("the posterior has no human scores 's_H' over dimension 'item'")
        blocks.append(_block("score", scores, "score", dr[0], dr[1], lv, same))
    pos = getattr(result, "position_effects", None)
    if pos is not None and len(pos):
        dr = _draws(idata, "b", "judge")
        if dr is not None:
            blocks.append(_block("b", pos, "b", dr[0], dr[1], lv, same))
    if not blocks:
        raise ValueError("nothing to compare: the result has neither scores nor position effects")
    out = pd.concat(blocks)
    out.attrs["level"] = lv
    out.attrs["interval"] = (f"{lv:.0%} Wald interval from the result's covariance ({getattr(result, 'cov_type', 'sandwich')}) "
                             f"vs {lv:.0%} equal-tailed posterior interval")
    return out
