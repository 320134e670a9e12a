"""The text summary of a :class:`~pydial.DialResult` (statsmodels' ``summary``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pydial.estimation.selection import selection_lines
from pydial.formatting import ITEMS_LABEL, by_score, format_pvalue
from pydial.inference.linearization import COV_DESCRIPTIONS

__all__ = ["summary"]


def summary(res: Any) -> str:
    """Return the text of :meth:`pydial.DialResult.summary`."""
    lam = "n/a" if np.isnan(res.lambda_) else "inf" if np.isinf(res.lambda_) else f"{res.lambda_:.4g}"
    cov = f"cov_type={res.cov_type} ({COV_DESCRIPTIONS[res.cov_type]})"
    if res.anchored_cov is not None:
        cov += f"  anchored_cov_type={res.anchored_cov}"
    if res.cluster_correction:
        cov += "  cluster correction G/(G-1)"
    head = [
        f"pydial fit: method={res.method}  rank={res.rank}  calibration={res.calibration}  engine={res.engine}",
        f"items N={len(res.items)}  LLM judges K={len(res.judges)}  judgments used: n_LLM={res.n_llm}  "
        f"n_H={res.n_human}" + ("" if res.ties is None else f" (ties included: {res.ties})"),
        f"lambda={lam}  converged={res.converged}  max|grad|={res.grad_norm:.2e}"
        + (f"  penalty={res.penalty}" if res.penalty else ""),
        (f"scores: AtC has no standard errors (its isotonic calibration step has no linearization)"
         f"{'; position effects: ' + cov if res.position_effects is not None else ''}"
         if res.method == "atc" else f"covariance: {cov}") + f"  level={res.level:.0%}",
    ]
    if not res.ok:
        head.insert(0, "*** NOT A VALID FIT (status: " + res.status + "); the numbers below are marked, not results ***")
    head += [f"{'problem' if not res.ok else 'warning'}: {p}" for p in res.problems]
    head += [f"status: {res.status}", *_fit_lines(res)]
    scores = res.scores[["score"]] if res.method == "atc" else res.scores
    with pd.option_context("display.width", 120, "display.max_rows", 200):
        style = "" if res.covariate_scale is None else "; style-controlled at z = 0; covariate scales: " + ", ".join(
            f"{c} {v:.4g}" for c, v in res.covariate_scale.items())
        parts = ["\n".join(head), "", f"Scores (centered{style}; {ITEMS_LABEL}):", _text(by_score(scores))]
        if res.gacv is not None:
            tab = res.gacv.round({c: 6 for c in res.gacv.columns if c != "gap"})  # a gap below 1e-6 is a near-tie
            parts += ["", "GACV path:", tab.to_string(index=False), *selection_lines(res.gacv)]
        if res.tie_parameters is not None:
            label = {"rao-kupper": "tau (Rao-Kupper threshold)"}.get(res.tie_parameters.attrs.get("model"),
                                                                      "nu (Davidson / Davidson-Beaver)")
            parts += ["", f"Tie parameters {label}:", _text(res.tie_parameters)]
        if res.position_effects is not None:
            parts += ["", "Position effects b_k (LLM-only fit; b > 0 favours the first-shown item):",
                      _text(res.position_effects)]
        if res.covariate_effects is not None:
            parts += ["", "Covariate effects beta (per standard deviation of the comparison covariate; beta > 0 "
                      "favours the response with more of it):", _text(res.covariate_effects)]
    return "\n".join(parts)


def _fit_lines(res: Any) -> list[str]:
    """Return the summary's lines on the judgments left out, the likelihood and the calibration test."""
    out = []
    if res.excluded is not None:
        tot = res.excluded.sum()
        left = ", ".join(f"{c.replace('_', ' ')} {int(v)}" for c, v in tot.items() if v)
        out.append(f"judgments left out: {left or 'none'}  (by judge: result.excluded)")
    if res.df_model is not None:
        out.append(f"log-likelihood llf={res.llf:.4f}  df_model={res.df_model}  nobs={res.nobs}  "
                   f"AIC={res.aic:.2f}  BIC={res.bic:.2f}")
    elif res.method == "atc":
        out.append("log-likelihood: none (AtC's isotonic scores are not a likelihood fit)")
    if not np.isnan(res.objective):
        out.append(f"weighted criterion Q_lambda={res.objective:.6f} (the objective the weighted fit minimizes; "
                   "not a log-likelihood)")
    if not np.isnan(res.llf_human):
        out.append(f"people's log-likelihood at the scores llf_human={res.llf_human:.4f}  "
                   f"(human loss l_H={res.loss_human:.6f})")
    ct = res.calibration_test
    if ct is not None:
        out.append("calibration test (LRT of s_H = M c): " + (
            f"T={ct.statistic:.4g}  df={ct.df}  p={format_pvalue(ct.p_value)}  AIC prefers {ct.aic_prefers}"
            if ct.defined else f"undefined ({ct.reason})"))
    return out


def _text(table: pd.DataFrame) -> str:
    """Return a table of the summary: numbers to 4 decimals, p-values by :func:`~pydial.formatting.format_pvalue`."""
    out = table.round(4)
    if "p_value" in out:
        out = out.astype({"p_value": object})
        out["p_value"] = [format_pvalue(float(p)) for p in table["p_value"]]
    return out.to_string()

