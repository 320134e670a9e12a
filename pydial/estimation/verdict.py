"""The verdict on a fit: its status and the problems behind it, decided once from the warnings of the fit."""

from __future__ import annotations

from typing import Any

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.exceptions import CalibrationWarning, DialError
from pydial.formatting import format_pvalue
from pydial.model.chart import DEFAULT_CALIBRATION, DEFAULT_RANK
from pydial.model.identifiability import design_report
from pydial.model.methods import ADAPTIVE
from pydial.optim import BOX

__all__ = ["STATUSES", "ANCHORED_METHODS", "verdict", "calibration_warning", "dial_model"]

STATUSES: tuple[str, ...] = ("ok", "no admissible candidate", "not identified", "at bound", "not converged",
                             "degenerate covariance")
"""Values of :attr:`DialResult.status`, most serious failure first after ``"ok"``."""

ANCHORED_METHODS: tuple[str, ...] = ("dial-anc", "pooled", "atc")
"""Methods whose scores assume the calibration restriction ``s_H = M c`` (and DIAL-Ada / -noPos at ``lambda = inf``)."""


def dial_model(est: Any) -> tuple[int, str]:
    """``(rank, calibration)`` of the estimate, or :func:`pydial.fit`'s defaults (1, ``"mu"``) for a method without them."""
    return (DEFAULT_RANK if est.rank is None else int(est.rank),
            DEFAULT_CALIBRATION if est.calibration is None else est.calibration)


def verdict(spec: Any, est: Any, data: Comparisons, caught: list[Warning]) -> tuple[str, tuple[str, ...]]:
    """Return ``(status, problems)`` of a fit from the warnings ``caught`` and a position effect on the box bound.

    Problems add :func:`pydial.check_design`'s failing rows as causes; a rejected calibration leaves the status ``"ok"``.
    """
    found: list[tuple[str, str]] = [(getattr(w, "status"), str(w)) for w in caught
                                     if isinstance(getattr(w, "status", None), str)]
    model = tuple(dict.fromkeys(str(w) for w in caught if isinstance(w, CalibrationWarning)))  # status stays
    if not est.converged and not any(st in ("not converged", "at bound", "not identified") for st, _ in found):
        found.append(("not converged", f"an optimization of the {spec.method} fit is not a resolved optimum "
                                       f"(max|grad| = {est.grad_norm:.2e})"))
    if est.b is not None:
        for name, b in zip(data.judges, np.asarray(est.b, float)):
            if abs(b) >= BOX * (1 - 1e-6):
                side = "first" if b > 0 else "second"
                found.append(("at bound", f"judge {name!r}: position effect b = {b:+.4g} is on the box bound "
                                          f"|b| = {BOX:g}: the {side}-shown item (almost) always wins, so the judge's "
                                          "order-effect BTL has no finite MLE and b is not identified"))
    if not found:
        return "ok", model
    rank, calibration = dial_model(est)
    try:
        rep = design_report(data, rank, calibration, spec.method, 0 if spec.seed is None else spec.seed, spec.penalty)
        bad = rep.table[(~rep.table["ok"]) & rep.table["condition"].isin(["separation", "human-mle"])]
        causes = [f"possible cause, {str(j) if j == 'human' else 'judge ' + repr(str(j))}: {c}: {d}"
                  for j, c, d in bad[["judge", "condition", "detail"]].itertuples(index=False)]
    except (ValueError, DialError):  # the diagnosis must never hide the verdict
        causes = []
    status = min((st for st, _ in found), key=lambda st: STATUSES.index(st) if st in STATUSES else len(STATUSES))
    return status, tuple(dict.fromkeys(msg for _, msg in found)) + tuple(causes) + model


def calibration_warning(spec: Any, est: Any) -> CalibrationWarning | None:
    """Return the :class:`~pydial.CalibrationWarning` of an anchored fit whose calibration test rejects at ``1 - level``."""
    ct, method = est.calibration_test, spec.method
    anchored = method in ANCHORED_METHODS or (method in ADAPTIVE and np.isinf(est.lambda_))
    if not anchored or ct is None or not ct.defined or not ct.p_value < 1 - spec.level:
        return None
    basis = {"pooled": "the pooled LLM scores"}.get(method, "mu" if est.calibration in (None, "mu") else "W = [mu, V]")
    rule = "the endpoint-margin rule" if est.gacv is not None and est.gacv.attrs.get("selection") == "endpoint-margin" \
        else "GACV"
    advice = (f"{rule} selected the anchored endpoint lambda = inf nonetheless; compare method='human' or "
              "calibration='W'" if method in ADAPTIVE else
              "fit method='dial-ada', which chooses the LLM weight by GACV and falls back toward the people's "
              "own fit when the judges' consensus disagrees with them")
    return CalibrationWarning(
        f"the calibration restriction s_H = M c (M = {basis}) of method {method!r} is rejected by its "
        f"likelihood-ratio calibration test: T = {ct.statistic:.4g} on {ct.df} df, "
        f"p = {format_pvalue(ct.p_value)} < {1 - spec.level:.2g}: the people's preferences are not those of the "
        f"judges' consensus up to scale, so these scores are biased toward the judges; {advice}")
