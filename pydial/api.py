r"""The entry point :func:`fit`: validate the arguments, pick the engine, run the estimator, build the result.

The estimators (:mod:`pydial.estimation`) run the optimizers they are given
(:class:`pydial.estimation.engines.Optimizers`); this module sits above both engines, so the numpy layers never import Stan.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers
from pydial.estimation.model import ENGINE_OPTIMIZERS, DialModel, optimizers
from pydial.estimation.results import DialResult
from pydial.estimation.spec import DEFAULT_METHOD, ModelSpec, spec_from_arguments
from pydial.exceptions import ArgumentTypeError

__all__ = ["fit", "optimizers", "ModelSpec"]

def _stan_optimizers(seed: int | None, penalty: str | None) -> Optimizers:
    """Stan's optimizers (:func:`pydial.stan.engine.stan_optimizers`), compiled on first use."""
    from pydial.stan.engine import stan_optimizers

    return stan_optimizers(seed, penalty)


ENGINE_OPTIMIZERS["stan"] = _stan_optimizers


def fit(
    data: Comparisons,
    method: str = DEFAULT_METHOD,
    *,
    rank: int | str | list[int] | None = None,
    calibration: str | None = None,
    ties: str | None = None,
    penalty: str | None = None,
    lambda_: Any = None,
    multiples: Any = None,
    include_endpoints: bool | str = True,
    cov_type: str | None = None,
    anchored_cov_type: str = "two-step",
    cluster_correction: bool = False,
    level: float = 0.95,
    engine: str = "numpy",
    seed: int | None = None,
    check: bool = True,
    covariate_effects: str = "judge",
    selection: Any = "gacv",
    spec: ModelSpec | None = None,
    **unknown: Any,
) -> DialResult:
    """Fit one of the paper's estimators.

    The default, ``"dial-ada"`` (Sec. "Adaptive choice of the LLM weight"), chooses the weight ``lambda`` of the LLM
    judgments by GACV and falls back toward the people's own fit when the judges' consensus disagrees with them.
    ``"dial-anc"`` assumes ``s_H = M c`` (the people's scores in the span of the judges'); when its likelihood-ratio
    test rejects that, the fit warns with :class:`~pydial.CalibrationWarning` and lists it in ``result.problems``
    (the status stays ``"ok"``).

    Parameters
    ----------
    data : Comparisons
        Validated judgments (:meth:`Comparisons.from_frame`).
    method : {"dial-ada", "dial-anc", "dial-nopos", "judges", "human", "pooled", "atc"}
        The estimator (default ``"dial-ada"``):

        * ``"judges"``: each LLM judge's own order-effect BTL (eq. binomial-model-llm); no human rows needed.
        * ``"human"``: the people's BTL MLE alone (eq. human-only-estimator).
        * ``"pooled"``: one BTL of all LLM judgments, ignoring judge and order, rescaled to the people.
        * ``"dial-nopos"``: DIAL-Ada with the order effects fixed at 0 (the order-agnostic ablation).
        * ``"dial-anc"``: the staged LLM-anchored fit (Alg. DIAL-Anc): structured LLM fit, then ``s_H = M c``.
        * ``"dial-ada"``: weighted joint fits on the lambda path, selected by GACV (Alg. DIAL-Ada).
        * ``"atc"``: the people's BTL ordering with isotonic calibration of the LLM consensus (point estimates only).
    rank : int, list of int or "auto", optional
        Disagreement rank ``r`` of ``S = gamma mu^T + U V^T`` (Cond. llm-structure); 1 when not given.  For
        ``dial-ada`` a list (or ``"auto"``: ``0 .. min(K-1, N-2, 3)``) selects ``(r, lambda)`` jointly by GACV
        (App. rank-selection).  Methods not in :data:`~pydial.estimation.spec.USES_RANK` ignore it with an
        :class:`~pydial.ArgumentWarning`.
    calibration : {"mu", "W"}, optional
        Human calibration basis: the consensus ``mu`` (``d = 1``; the default) or ``W = [mu, V]`` (``d = r + 1``).
        Methods not in :data:`~pydial.estimation.spec.USES_CALIBRATION` ignore it with an :class:`~pydial.ArgumentWarning`.
    engine : {"numpy", "stan"}
        Optimizer; ``"stan"`` runs the same model through Stan's optimizer.
    cov_type : {"fisher", "binomial", "cell", "record"}, optional
        Meat of the covariance (:mod:`pydial.inference.linearization`); default ``"fisher"`` for ``human`` and
        ``"cell"`` (judge-pair clustered) otherwise.
    level : float, default 0.95
        Level of every interval reported.
    seed : int, optional
        Seed of the generic-rank design checks (and of Stan when used).
    lambda_ : float or sequence of float, optional
        Explicit finite candidate weights for ``dial-ada`` / ``dial-nopos`` (absolute values of lambda in eq.
        weighted-loss).  ``inf`` alone is the anchored endpoint (``dial-ada`` at ``lambda_=inf`` is ``dial-anc``).
    multiples : sequence of float, optional
        Candidate weights as multiples of ``n_L / n_H``; default seven log-spaced values from 0.01 to 10
        (App. lambda-selection).
    include_endpoints : bool or "anchored", default True
        Whether ``lambda = 0`` (human BTL) and ``inf`` (DIAL-Anc) compete in GACV; ``inf`` remains the fallback when
        no finite weight is admissible.  ``"anchored"``: only ``inf`` competes, the human-only fit is listed in
        ``result.gacv`` but not selected (with ``penalty="firth"`` at small human budgets GACV under-states its
        optimism; see ``analyses/realdata/results_firth/summary.md``).
    anchored_cov_type : {"two-step", "fixed-basis"}
        Covariance at ``lambda = inf``: the two-step delta method (the ``lambda -> inf`` limit of the sandwich at the
        observed ``n_H/n_L``; default) or the ``M`` fixed limit ``M H_M^{-1} M^T`` of Cor. uniform-lambda.
    ties : {None, "davidson", "rao-kupper"}
        ``None``: ties are excluded (binary models, counted in ``data.summary()``); ``"davidson"``: Davidson's model
        (Davidson-Beaver for the judges' order-effect models); ``"rao-kupper"``: the Rao-Kupper threshold model.
        Every method, engine, ``cov_type`` and ``penalty`` takes either, with a tie parameter per judge and one for
        the people (``result.tie_parameters``; ``pooled``: one ``nu`` for the pooled judges).
    check : bool, default True
        Run :func:`pydial.check_design` first and raise :class:`~pydial.IdentifiabilityError` when the fit cannot exist.
    penalty : {None, "firth"}
        ``"firth"``: maximize ``l(theta) + 1/2 log det I(theta)`` (Firth 1993, the Jeffreys prior;
        :mod:`pydial.model.penalty`), which removes the ``O(1/n)`` bias and is finite on any connected design, even
        under complete separation.  Applies to every human BTL (``human``, ``atc``'s ordering, ``lambda = 0``), each
        judge's BTL, both stages of ``pooled``, the calibration GLM of ``dial-anc`` (and ``lambda = inf``) and the
        human block of ``dial-ada``'s finite weights.  Standard errors: the sandwich (or Fisher) covariance at the
        penalized estimate, the unpenalized information as bread; the calibration LRT compares the unpenalized fits.
    cluster_correction : bool, default False
        Scale the clustered meats (``cov_type="cell"`` or ``"record"``) by ``G/(G-1)``, ``G`` the number of clusters
        (statsmodels' correction without ``(n-1)/(n-k)``).  Off, as in the paper; with few judge-pair cells per judge
        it widens the position effects' slightly short intervals.  :meth:`DialResult.with_cov` switches it later.
    covariate_effects : {"judge", "shared"}
        With response covariates (``Comparisons.from_frame(..., covariates=...)``): one effect ``beta_k`` per LLM judge
        (default) or one ``beta_L`` shared by them; the people have their own ``beta_H``.  The scores are
        style-controlled (at ``z = 0``).  Ignored without covariates.
    selection : "gacv", ("endpoint-margin", c), dict or Selection, default "gacv"
        How ``dial-ada`` / ``dial-nopos`` choose the weight (:class:`~pydial.estimation.selection.Selection`).
        ``"gacv"``: the admissible candidate of smallest GACV, as in the paper.  ``("endpoint-margin", c)``, beyond
        the paper: ``lambda = inf`` if ``GACV(inf) - min_{lambda < inf} GACV <= c / n_H`` (``c >= 0``), else GACV's.
        ``result.gacv`` reports each candidate's ``gap`` to the smallest GACV and the ``near_tie`` candidates
        (tolerance ``1e-6``; set with ``{"rule": ..., "margin": ..., "tolerance": ...}``); its ``attrs`` and the
        summary name the rule and the selection.
    spec : ModelSpec, optional
        A specification built beforehand (``pydial.ModelSpec(method, ...)``) instead of the arguments above;
        ``result.spec`` refits the same model on other data.
    **unknown
        Refused: any other keyword is an :class:`~pydial.ArgumentTypeError` naming it.

    Returns
    -------
    DialResult
        With the judgments used (``nobs``, ``n_human``, ``n_llm``, ``n_obs_by_judge``; left out: ``excluded``) and,
        for model comparison, ``llf``, ``df_model``, ``aic``, ``bic`` (:mod:`pydial.estimation.fitstats`).

    Warns
    -----
    CalibrationWarning
        The calibration restriction of ``dial-anc``, ``pooled``, ``atc`` (or of ``dial-ada`` at ``lambda = inf``) is
        rejected by its test at the fit's ``level``.

    Raises
    ------
    ArgumentError
        An argument is invalid (a ``ValueError``; :class:`~pydial.ArgumentTypeError`, a ``TypeError``, for a wrong
        type or an unknown keyword); raised before any work, by :class:`ModelSpec`.
    DataError, IdentifiabilityError
        The data or the design cannot give the requested fit.
    ConvergenceError
        The fit failed numerically (a floating-point error, a linear-algebra routine that did not converge); the
        message names the method, the original error is chained.  A singular matrix raises
        :class:`IdentifiabilityError` instead.

    Examples
    --------
    >>> import pydial
    >>> res = pydial.fit(pydial.datasets.arena(), "dial-ada")
    >>> res.status
    'ok'
    >>> round(float(res.lambda_), 2)
    0.35
    >>> res.scores.sort_values("score", ascending=False).index[:3].tolist()
    ['gpt-4', 'claude-v1', 'claude-instant-v1']
    >>> bool(res.calibration_test.p_value < 0.001)
    True
    """
    given = {k: v for k, v in locals().items() if k in DEFAULTS}  # the model arguments, as passed
    if spec is None:
        spec = spec_from_arguments(method, {k: v for k, v in given.items() if v is not DEFAULTS[k]} | unknown)
    elif not isinstance(spec, ModelSpec):
        raise ArgumentTypeError(f"spec must be a pydial.ModelSpec, got {type(spec).__name__}")
    elif unknown or method != DEFAULT_METHOD or any(v is not DEFAULTS[k] for k, v in given.items()):
        raise ArgumentTypeError("fit(data, spec=...) takes no other model arguments: change the spec with spec.replace(...)")
    return DialModel(data, spec).fit()


DEFAULTS: dict[str, Any] = {k: p.default for k, p in inspect.signature(fit).parameters.items()
                            if p.kind is p.KEYWORD_ONLY and k != "spec"}
"""The defaults of :func:`fit`'s model arguments (an argument left at its default is not passed to the spec)."""
