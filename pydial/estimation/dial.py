r"""DIAL-Anc, DIAL-Ada and DIAL-noPos for every outcome family: one driver, the family's :class:`~pydial.estimation.steps.Steps`.

1. the people's model (``lambda = 0``); 2. per rank, the staged fit (``lambda = inf``); 3. DIAL-Ada / -noPos:
the finite weights from the largest, warm-started; 4. the candidate of smallest GACV; 5. its linearization,
the judges' effects and the calibration LRT (Prop. calibration-test).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import StagedFit
from pydial.estimation.fitstats import FitStats, structured_log_likelihood
from pydial.estimation.results import Estimate
from pydial.estimation.selection import (DEFAULT_MULTIPLES, Candidate, PathEntry, Selection, annotate_selection,
                                         path_candidates, path_table, select_candidate)
from pydial.estimation.steps import Steps, family_anchored_candidate, family_human_candidate
from pydial.model.likelihood import Objective
from pydial.model.cells import family_totals
from pydial.optim import warn_unresolved
from pydial.resources import progress

__all__ = ["fit_dial", "path_weights", "dial_stats"]


def path_weights(n_llm: int, n_human: int, lambda_: Any, multiples: Any) -> np.ndarray:
    """Return the finite weights of the path, largest first: ``lambda_``, or ``multiples * n_L / n_H`` (App. lambda-selection).

    ``lambda_`` and ``multiples`` are :class:`~pydial.estimation.spec.ModelSpec`'s, validated there.
    """
    if lambda_ is None:
        return np.sort(np.asarray(DEFAULT_MULTIPLES if multiples is None else multiples, float) * n_llm / n_human)[::-1]
    return np.sort(np.asarray(lambda_, float))[::-1]


def fit_dial(data: Comparisons, steps: Steps, cal: str, *, adaptive: bool, lambda_: Any, multiples: Any,
             include_endpoints: bool | str, rank_grid: list[int], selection: Selection = Selection()) -> Estimate:
    """Run Alg. DIAL-Anc (``adaptive=False``) or Alg. DIAL-Ada / -noPos (eq. weighted-loss, eq. gacv) with ``steps`` and ``cal``.

    The other arguments are those of :func:`pydial.fit` (:class:`~pydial.estimation.spec.ModelSpec`).
    """
    n_l, n_h = family_totals(data, steps.family)
    hum = family_human_candidate(data, steps.family, steps.engine, steps.penalty)
    options = []
    staged: dict[int, Any] = {}
    for r in rank_grid:
        staged[r] = sf = steps.staged(r)
        warn_unresolved(sf.llm_opt, f"structured LLM-only fit (rank {r})")
        cands = [family_anchored_candidate(data, sf, steps.family, steps.penalty)]
        if adaptive:
            x, warm = sf.x, Candidate(np.inf, np.inf, None, opt=sf.llm_opt)  # the first weight starts at the staged fit
            for weight in progress(path_weights(n_l, n_h, lambda_, multiples), len(data.llm), f"lambda path (rank {r})"):
                c = steps.finite(sf.chart, float(weight), x, float(weight * n_h / n_l), warm)
                if c.admissible:
                    assert c.theta is not None  # an admissible finite candidate has its fit
                    x, warm = c.theta, c
                cands.append(c)
        allc = path_candidates(cands, hum, include_endpoints) if adaptive else cands
        options += [(r, c) for c in allc]
    table = path_table(options, len(rank_grid) > 1 and adaptive and bool(include_endpoints))
    r_sel, best, fallback = select_candidate(options, table, steps.what, selection, n_h)
    table = annotate_selection(table, r_sel, best.lambda_, selection, n_h) if adaptive else table
    sf = staged[r_sel]
    ch = sf.chart
    finite = bool(np.isfinite(best.lambda_) and best.lambda_ > 0)
    best = steps.polish(ch, best) if finite else best
    x_sel = best.theta if finite else sf.x
    assert x_sel is not None  # a selected finite weight is admissible, so it has its fit
    structure = sf.llm_chart.structure(sf.llm_theta)
    opts = [sf.llm_opt, sf.cal_opt] + ([best.opt] if best.opt is not None else [])
    return Estimate(**steps.selected(sf, best, hum), rank=r_sel, calibration=cal, judge_scores=structure.S,
                    structure=structure,
                    calibration_coef=None if best.lambda_ == 0 else ch.calibration_coordinates(x_sel[: ch.dim]),
                    lambda_=best.lambda_, converged=all(o.resolved for o in opts), grad_norm=max(o.grad_norm for o in opts),
                    fallback=fallback, theta=x_sel[: ch.dim], chart=ch, llm_theta=sf.llm_theta, llm_chart=sf.llm_chart,
                    path=tuple(PathEntry.light(staged[r].chart, staged[r].x, c) for r, c in options),
                    gacv=table if adaptive else None, stats=dial_stats(data, steps, sf, best, hum, adaptive))


def dial_stats(data: Comparisons, steps: Steps, sf: StagedFit, best: Candidate, hum: Candidate,
               adaptive: bool) -> FitStats:
    r"""Return the log-likelihood, parameter count and weighted criterion of the selected DIAL fit.

    A finite weight: the joint fit's ``l_LLM + l_H`` and :math:`Q_\lambda`; ``inf``: the staged fit's two stages;
    0: the people's model and the LLM-only fit.
    """
    family, tied = steps.family, not steps.family.is_binary
    ch, chL = sf.chart, sf.llm_chart
    df_llm = chL.dim - chL.n_gauge + int(sf.llm_free.size)
    df_cal = ch.dim - ch.n_gauge + int(sf.free.size)
    if np.isfinite(best.lambda_) and best.lambda_ > 0:
        x = best.theta
        assert x is not None and x.size == ch.dim + (sf.free.size if tied else 0)
        l_llm, l_h = (structured_log_likelihood(data, family, ch, x, sf.free, w) for w in ("llm", "human"))
        q = Objective.weighted(ch, data, best.lambda_, steps.penalty, ties=family,
                               free=sf.free if tied else None).value(x)
        return FitStats(l_llm + l_h, df_cal, l_h, q if adaptive else np.nan)
    l_llm = structured_log_likelihood(data, family, chL, sf.llm_x, sf.llm_free, "llm")
    if np.isinf(best.lambda_):
        l_h = structured_log_likelihood(data, family, ch, sf.x, sf.free, "human")
        return FitStats(l_llm + l_h, df_cal, l_h)
    assert hum.theta is not None  # the selected human endpoint has its fit
    l_h = -family_totals(data, family)[1] * hum.loss_human
    return FitStats(l_llm + l_h, int(hum.theta.size) + df_llm, l_h, hum.loss_human if adaptive else np.nan)
