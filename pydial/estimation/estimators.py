r"""The estimators of the paper, run by :func:`~pydial.estimation.estimators.estimate` (:func:`pydial.fit`).

``judges``: each judge's own order-effect BTL (eq. binomial-model-llm); ``human``: the centered human BTL MLE
:math:`\hat s_0` (eq. human-only-estimator); ``pooled``: the pooled LLM BTL, rescaled to the humans; ``dial-anc``:
the staged LLM-anchored endpoint (Alg. DIAL-Anc); ``dial-ada``: the weighted joint fits on the lambda path, selected
by GACV (Alg. DIAL-Ada); ``dial-nopos``: DIAL-Ada without order effects; ``atc``: the human BTL ordering with the
LLM consensus isotonic-calibrated (AtC).
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
from pydial.estimation.spec import METHODS, ModelSpec  # noqa: F401 (METHODS re-exported: the command line's list)
from pydial.estimation.steps import Steps
from pydial.exceptions import ConvergenceError, IdentifiabilityError
from pydial.model.families import family_of
from pydial.model.methods import USES_CALIBRATION, USES_RANK


def method_arguments(method: str, **arguments: Any) -> dict[str, Any]:
    """Return the ``rank`` / ``calibration`` among ``arguments`` that ``method`` uses (passed on with no ArgumentWarning)."""
    users = {"rank": USES_RANK, "calibration": USES_CALIBRATION}
    return {k: v for k, v in arguments.items() if method in users.get(k, (method,))}


@contextmanager
def numerical_errors(what: str) -> Iterator[None]:
    """Re-raise numpy's errors in ``what``: singular as :class:`IdentifiabilityError`, others as :class:`ConvergenceError`."""
    try:
        yield
    except np.linalg.LinAlgError as e:
        if "singular" in str(e).lower():
            raise IdentifiabilityError(f"{what} failed: a matrix of the fit is singular ({e}); the design may not "
                                       "identify the parameters (see pydial.check_design)") from e
        raise ConvergenceError(f"{what} failed: a linear-algebra routine did not succeed ({e})") from e
    except FloatingPointError as e:
        raise ConvergenceError(f"{what} failed: a floating-point error ({e})") from e


def estimate(data: Comparisons, spec: ModelSpec, engine: Optimizers, rank_grid: list[int]) -> Estimate:
    """Run the estimator of ``spec`` with ``engine`` over ``rank_grid``: the point estimates and their linearizations."""
    method, family, shared = spec.method, family_of(spec.ties), spec.covariate_effects == "shared"
    if method in ("pooled", "atc"):
        fit = fit_pooled if method == "pooled" else fit_atc
        return fit(data, rank_grid[0], family=family, engine=engine, shared=shared)
    if method in ("human", "judges"):
        return fit_btl(data, method, family=family, seed=spec.seed, engine=engine, penalty=spec.penalty)
    cal = cast(str, spec.calibration)
    steps = Steps(data, cal, spec.order, family, engine, spec.penalty, shared=shared)
    anchored = spec.lambda_ == (float("inf"),)  # the single weight inf: the anchored endpoint alone
    return fit_dial(data, steps, cal, adaptive=spec.adaptive and not anchored, lambda_=spec.lambda_,
                    multiples=spec.multiples, include_endpoints=spec.include_endpoints, rank_grid=rank_grid,
                    selection=spec.selection)
