"""The Wald tables of a fit from the covariances of its linearization under one meat.

:func:`~pydial.inference.wald.covariances` forms them, :func:`~pydial.inference.wald.tables` the labelled tables.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from pydial.data.comparisons import Comparisons
from pydial.exceptions import CovarianceWarning
from pydial.inference.linearization import (Linearization, consensus_table, position_effect_tables, score_tables,
                                            tie_table, wald_table, zero_variance, zero_variance_warning)

__all__ = ["covariances", "tables", "variance_warnings", "beta_support", "covariate_effect_tables", "TABLES"]

TABLES: tuple[str, ...] = ("scores", "cov", "position_effects", "position_effects_cov", "consensus", "judge_scores_se",
                           "tie_parameters", "covariate_effects", "covariate_effects_cov")
"""The tables :func:`tables` returns (``None`` for an estimate the method does not make)."""


def covariances(linearization: Sequence[Linearization], data: Comparisons, cov: str, anchored: str | None,
                correction: bool, only: str | None = None) -> dict[str, Any]:
    """Return the covariance of every target of ``linearization`` under the meat ``(cov, anchored, correction)``.

    ``judge_scores``, ``log_nu``: lists of pairs; ``only``: form just the linearizations holding that target.
    """
    out: dict[str, Any] = {"judge_scores": [], "log_nu": []}
    for lin in linearization:
        if only is not None and only not in lin.blocks:
            continue
        C = lin.covariance(data, cov, anchored_cov_type=anchored or "two-step", cluster_correction=correction)
        for name, sl in lin.blocks.items():
            if name in ("judge_scores", "log_nu"):
                out[name].append((lin, C[sl, sl]))
            else:
                out[name] = C[sl, sl]
    return out


def tables(est: Any, C: dict[str, Any], data: Comparisons, level: float, ties: str | None) -> dict[str, Any]:
    """Return the tables :data:`TABLES` of ``est`` with the covariances ``C`` (NaN standard errors where ``C`` has none)."""
    items, judges = data.items, data.judges

    def cov(name: str, q: int) -> np.ndarray:
        return C[name] if name in C else np.full((q, q), np.nan)  # no linearization: no covariance

    out: dict[str, Any] = dict.fromkeys(TABLES)
    if est.beta is not None:
        free = _beta_free(est, data)
        out["covariate_effects"], out["covariate_effects_cov"] = covariate_effect_tables(
            est.beta, cov("beta", int(free.sum())), est.beta_labels, data.covariates, level, free)
    out["scores"], out["cov"] = score_tables(est.s, cov("scores", len(items)), items, level)
    if est.b is not None:
        out["position_effects"], out["position_effects_cov"] = position_effect_tables(
            est.b, cov("b", len(judges)), judges, level)
    if est.gamma is not None:
        out["consensus"] = consensus_table(est.gamma, cov("gamma", len(judges)), judges, level)
    if C["judge_scores"] and est.judge_scores is not None:
        se = np.sqrt(np.array([np.diag(Ck) for _, Ck in C["judge_scores"]]))
        out["judge_scores_se"] = pd.DataFrame(se, index=pd.Index(judges, name="judge"),
                                              columns=pd.Index(items, name="item"))
    if est.log_nu is not None:
        assert ties is not None  # tie parameters come with a tie model
        log_nu = est.log_nu
        var = np.full(len(log_nu), np.nan)
        for lin, Cn in C["log_nu"]:
            var[log_nu.index.get_indexer(list(lin.tie_labels))] = np.diag(Cn)
        rows = np.arange(len(log_nu))
        free_nu = rows[np.isfinite(log_nu.to_numpy(float))]
        out["tie_parameters"] = tie_table(list(log_nu.index), rows, free_nu, log_nu.to_numpy(float)[free_nu],
                                          var[free_nu], level, ties)
    return out


def variance_warnings(est: Any, C: dict[str, Any], data: Comparisons) -> list[CovarianceWarning]:
    """Return the warnings of the zero variances in ``C`` (beta, scores, b, gamma), read from the arrays, not the tables."""
    keys = [k for k in ("beta", "scores", "b", "gamma") if k in C and (k == "scores" or getattr(est, k) is not None)]
    zeros = {k: zero_variance(np.diag(C[k])) for k in keys}
    return [zero_variance_warning("score" if k == "scores" else k, _labels(k, est, data), z) for k, z in zeros.items() if z.any()]


def _labels(key: str, est: Any, data: Comparisons) -> list[str]:
    """Return the labels of the covariance ``key`` (:func:`variance_warnings`): free ``judge:covariate`` pairs, items, judges."""
    if key == "beta":
        names = [f"{k}:{c}" for k in est.beta_labels for c in data.covariates]
        return [n for n, f in zip(names, np.ravel(_beta_free(est, data))) if f]
    return list(data.items) if key == "scores" else list(data.judges)


def _beta_free(est: Any, data: Comparisons) -> np.ndarray:
    """Return the estimated entries of the estimate's ``beta`` (:func:`beta_support`; all when every one is)."""
    free = beta_support(data, est.beta_labels)
    return np.ones(est.beta.shape, bool) if free is None else free


def beta_support(data: Comparisons, labels: Sequence[str]) -> np.ndarray | None:
    """Return which entries of ``beta`` (rows ``labels`` x ``p``) are estimated, ``None`` when all are.

    An entry is a fixed 0 when its covariate is 0 on all the row's cells (:attr:`~pydial.Comparisons.covariate_support`).
    """
    sup = data.covariate_support
    if sup.all():
        return None
    index = {name: k for k, name in enumerate(data.judges)} | {data.human_judge: data.K}
    return np.array([sup[index[lab]] if lab in index else sup[:-1].any(axis=0) for lab in labels], bool).reshape(-1, data.p)


def covariate_effect_tables(beta: np.ndarray, cov: np.ndarray, labels: Sequence[str], covariates: Sequence[str],
                            level: float, free: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the Wald table (index ``(judge, covariate)``, judge-major) and covariance of ``beta``.

    Only the entries ``free`` (default all) are listed; the others are fixed at 0.
    """
    idx = pd.MultiIndex.from_product([list(labels), list(covariates)], names=["judge", "covariate"])
    keep = np.ones(len(idx), bool) if free is None else np.ravel(free)
    idx = idx[keep]
    tab = wald_table(np.ravel(beta)[keep], cov, [f"{k}:{c}" for k, c in idx], level, "beta")
    tab.index = idx
    return tab, pd.DataFrame(np.asarray(cov, float), index=idx, columns=idx.copy())
