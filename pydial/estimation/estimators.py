r"""The estimators of the paper, run by :func:`estimate` with the optimizers of an engine (:func:`pydial.fit`).

========== ==================================================================
method     estimator
========== ==================================================================
judges     each judge's own order-effect BTL (eq. binomial-model-llm), no humans
human      centered human BTL MLE :math:`\hat s_0` (eq. human-only-estimator)
pooled     pooled LLM BTL ignoring judge and order, rescaled to the humans
dial-anc   staged LLM-anchored endpoint (Alg. DIAL-Anc, eq. staged-calibrated-estimator)
dial-ada   weighted joint fits on the lambda path selected by GACV (Alg. DIAL-Ada)
dial-nopos DIAL-Ada with the order effects fixed at 0 (order-agnostic ablation)
atc        human BTL ordering + isotonic calibration of the LLM consensus (AtC)
========== ==================================================================
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, cast

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.estimation.baselines import fit_atc, fit_pooled
from pydial.estimation.btl import fit_btl
from pydial.estimation.engines import Optimizers
from pydial.estimation.dial import fit_dial
from pydial.estimation.results import Estimate
from pydial.estimation.selection import Selection
from pydial.estimation.steps import Steps
from pydial.model.families import family_of
from pydial.exceptions import ArgumentError, ConvergenceError, IdentifiabilityError
from pydial.model.identifiability import ESTIMATORS

METHODS: tuple[str, ...] = ESTIMATORS
ENGINES: tuple[str, ...] = ("numpy", "stan")
NEEDS_HUMAN = ("human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
USES_RANK: tuple[str, ...] = ("dial-nopos", "dial-anc", "dial-ada", "atc")
"""Methods that fit the structured LLM model and so use ``rank``."""
DIAL_METHODS: tuple[str, ...] = ("dial-nopos", "dial-anc", "dial-ada")
"""The methods of :func:`pydial.estimation.dial.fit_dial`."""
USES_CALIBRATION: tuple[str, ...] = DIAL_METHODS
"""Methods that use ``calibration``: the DIAL methods (AtC always calibrates along ``mu``)."""
BASELINES = {"pooled": fit_pooled, "atc": fit_atc}
"""The baselines, one fit for every outcome family (:mod:`pydial.estimation.baselines`)."""


def method_arguments(method: str, **arguments: Any) -> dict[str, Any]:
    """Return the ``rank`` / ``calibration`` among ``arguments`` that ``method`` uses.

    They are passed to :func:`pydial.fit` for several methods without an
    :class:`ArgumentWarning`, e.g. ``fit(data, m, **method_arguments(m, rank=2))``.
    """
    users = {"rank": USES_RANK, "calibration": USES_CALIBRATION}
    return {k: v for k, v in arguments.items() if method in users.get(k, (method,))}


@contextmanager
def numerical_errors(what: str) -> Iterator[None]:
    """Turn numpy's numerical exceptions raised inside ``what`` into pydial's errors.

    The original is chained: a singular matrix into :class:`IdentifiabilityError`,
    any other :class:`numpy.linalg.LinAlgError` or a :class:`FloatingPointError` into
    :class:`ConvergenceError`.
    """
    try:
        yield
    except np.linalg.LinAlgError as e:
        if "singular" in str(e).lower():
            raise IdentifiabilityError(f"{what} failed: a matrix of the fit is singular ({e}); the design may not "
                                       "identify the parameters (see pydial.check_design)") from e
        raise ConvergenceError(f"{what} failed: a linear-algebra routine did not succeed ({e})") from e
    except FloatingPointError as e:
        raise ConvergenceError(f"{what} failed: a floating-point error ({e})") from e


def estimate(data: Comparisons, method: str, *, engine: Optimizers, calibration: str | None, lambda_: Any, multiples: Any,
             include_endpoints: bool | str, ties: str | None, seed: int | None, rank_grid: list[int],
             penalty: str | None, shared: bool = False, selection: Selection = Selection()) -> Estimate:
    """Run the estimator ``method`` with ``engine``'s optimizers (arguments validated by :class:`ModelSpec`).

    ``shared``: one covariate effect for all LLM judges (``covariate_effects="shared"``); ``selection``:
    how DIAL-Ada / -noPos choose the weight (:class:`~pydial.estimation.selection.Selection`).

    Returns the point estimates and their linearizations; :func:`pydial.estimation.results.build_result`
    forms the covariances and the result.
    """
    if method in BASELINES:
        return BASELINES[method](data, rank_grid[0], ties=ties, engine=engine, shared=shared)
    if method in ("human", "judges"):
        return fit_btl(data, method, ties=ties, seed=seed, engine=engine, penalty=penalty)
    order = method != "dial-nopos"
    cal = cast(str, calibration)
    steps = Steps(data, cal, order, family_of(ties), engine, penalty, shared=shared)
    return fit_dial(data, steps, cal, adaptive=(method != "dial-anc"), lambda_=lambda_, multiples=multiples,
                    include_endpoints=include_endpoints, rank_grid=rank_grid, selection=selection)


def rank_candidates(rank: Any, data: Comparisons, method: str) -> list[int]:
    """Validate ``rank`` (int, list, or "auto") into a list of candidate ranks."""
    top = max(0, min(data.K - 1, data.N - 2, 3))
    if isinstance(rank, str):
        if rank != "auto":
            raise ArgumentError(f"rank must be a non-negative integer, a list of them, or 'auto', got {rank!r}")
        grid = list(range(top + 1))
    elif isinstance(rank, (int, np.integer)):
        grid = [int(rank)]
    else:
        try:
            grid = [int(r) for r in rank]
        except TypeError:
            raise ArgumentError(f"rank must be a non-negative integer, a list of them, or 'auto', got {rank!r}") from None
    if not grid or any(r < 0 for r in grid):
        raise ArgumentError(f"ranks must be non-negative integers, got {rank!r}")
    if len(grid) > 1 and method not in ("dial-ada", "dial-nopos"):
        raise ArgumentError(f"a rank grid (rank={rank!r}) needs method 'dial-ada' or 'dial-nopos', got {method!r}")
    return sorted(set(grid))
