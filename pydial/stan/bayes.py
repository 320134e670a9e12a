r"""NUTS posteriors of the DIAL models as arviz data (a DataTree on arviz 1.x, an InferenceData on 0.x).

``method="dial-ada"`` (and ``"dial-nopos"``, ``"dial-anc"``) samples
``stan/dial_sample.stan`` (the structured model in an identified
parameterization, optional Davidson-Beaver or Rao-Kupper ties);
``method="judges"`` and ``method="human"`` sample ``stan/judges.stan`` (each
judge's own order-effect BTL; the people as one more judge, or alone).

``program=PATH`` samples a user's program (a shipped one's ``#include`` lines plus additions)
on the same data dictionary (:func:`pydial.stan.standata`, plus ``extra``); its own
variables come back labelled by the judges, the people and the items where their sizes
say so (:func:`user_axes`).

The returned object has the groups ``posterior`` (identified quantities only,
with dimensions named ``item``, ``judge``, ``rank``, ``basis``, ``tie_judge``),
``log_likelihood`` (``log_lik`` per cell, dimension ``cell``; one cell is one
``(judge, i, j, a)`` combination, so LOO is leave-one-cell-out; with
``log_lik="judgment"`` one value per judgment, dimension ``judgment``),
``posterior_predictive`` (replicated counts ``wins_i, wins_j, ties`` per
cell, drawn by the program's ``paired_rng``, for arviz's posterior predictive
plots: :func:`pydial.stan.idata.plot_ppc`),
``observed_data`` (the outcome counts per cell) and ``sample_stats``.  Its
``attrs`` record the program, backend, priors, weights and any sampler
problems (which are also raised as :class:`~pydial.stan.SamplerWarning`).

The layout is the same on both backends.  On CmdStan a single run is
converted by arviz's ``from_cmdstanpy`` (posterior, ``log_lik``, sampler
statistics), keeping the posterior variables pydial reports and adding the
derived ones, the replicated counts split into the three outcome variables,
and ``observed_data``; on httpstan, and for results combined from two runs
(the cut posterior, ``b_stage="llm-only"``), the ``(chain, draw, *shape)``
arrays (:class:`SampleResult`) are assembled by ``arviz.from_dict``.  Both go
through :mod:`pydial.stan.idata`, the one module that knows the arviz version:
an :class:`xarray.DataTree` on arviz 1.x, an ``arviz.InferenceData`` on arviz
0.x (Python 3.11), with the same groups, coordinates and root ``attrs``.

``attrs["estimand"]`` records what the posterior estimates, so that
:func:`pydial.stan.compare_intervals` compares a fit with the posterior of the
same estimator; ``posterior(data, like=result)`` samples that posterior
(``dial-anc``: the cut posterior, ``stan/dial_calibrate.stan``).  The record
is written on the root and on the ``posterior`` group and survives
``to_netcdf`` / ``from_netcdf``.
"""

from __future__ import annotations

import json
import numbers
import warnings
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.model.families import family_of

from pydial.estimation.spec import (COVARIATE_EFFECTS, DEFAULT_METHOD, ModelSpec, check_choice, check_count, check_level,
                                    check_seed)
from pydial.estimation.steps import human_effects
from pydial.model.chart import CALIBRATIONS

from ..exceptions import ArgumentError, ArgumentTypeError, DataError, caller_stacklevel, renamed_arguments
from ..optim import BOX
from . import idata as azio
from .backend import BACKENDS, CompiledModel, SampleResult, SamplerWarning, compile_model
from .compiled import APPROXIMATIONS
from .programs import data_names
from .schema import (
    DIAL_SAMPLE_PRIORS,
    JUDGES_PRIORS,
    TIES_CODE,
    CellTable,
    data_fingerprint,
    dial_calibrate_data,
    dial_sample_data,
    dial_sample_inits,
    dial_sample_start,
    human_cell_table,
    judges_data,
    llm_cell_table,
    merge_priors,
    mu_reference,
    with_extra,
)

__all__ = ["ALGORITHMS", "POSTERIOR_METHODS", "B_SOURCES", "posterior", "estimand", "result_estimand",
           "CONSENSUS_STRENGTH_MIN", "check_extra", "user_axes", "user_dims", "USER_DIM_SUFFIXES"]

CONSENSUS_STRENGTH_MIN = 0.1
"""Warn when the 5% posterior quantile of ``consensus_strength`` falls below this."""

_STAT_NAMES = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}


def _sample_stats(res: SampleResult) -> dict[str, np.ndarray]:
    out = {}
    for k, v in res.stats.items():
        name = _STAT_NAMES.get(k, k.rstrip("_"))
        out[name] = v.astype(bool) if name == "diverging" else (v.astype(np.int64) if name in ("tree_depth", "n_steps") else v)
    return out


def _observed(cells: Sequence[CellTable]) -> dict[str, np.ndarray]:
    cat = {f: np.concatenate([getattr(c, f) for c in cells]) for f in ("wins_i", "wins_j", "ties")}
    return cat


ESTIMAND_FIELDS: tuple[str, ...] = ("method", "rank", "calibration", "lambda_", "ties", "order", "b", "penalty",
                                   "covariates", "data")
"""Fields of the estimand record (``idata.attrs["estimand"]``, JSON) that a comparison checks."""

CUT_WARMUP_MAX = 200
"""Largest number of warmup iterations of the second stage of the cut posterior (its target is a product
of near-Gaussian log-concave factors, which NUTS reaches quickly; each iteration costs all draws)."""

ALGORITHMS: tuple[str, ...] = ("nuts", *APPROXIMATIONS)
"""Posterior algorithms of :func:`posterior`: NUTS, and CmdStan's Laplace approximation and Pathfinder."""

LOG_LIK_UNITS: tuple[str, ...] = ("cell", "judgment")
"""Units of the pointwise log-likelihood of :func:`posterior` (default ``"cell"``)."""

B_SOURCES: tuple[str, ...] = ("joint", "llm-only")
"""Where a DIAL posterior's order effects ``b`` come from: the (weighted) joint posterior, or the
LLM-only posterior of the structured model (the convention of the frequentist DIAL fits, whose
position effects are those of the LLM-only stage)."""


def _estimand(method: str, *, model: str, rank: int | None, calibration: str | None, lam: float, ties: str | None,
              order: bool, b: str, scores: str | None, penalty: str | None = None,
              covariates: str | None = None) -> dict[str, Any]:
    dial = method.startswith("dial")
    return {
        "method": method,
        "model": model,
        "rank": int(rank) if dial and rank is not None else None,
        "calibration": (calibration if calibration is not None else "none") if dial else None,
        "lambda_": float(lam) if dial else None,
        "ties": ties,
        "order": bool(order) if method != "human" else None,
        "b": b,
        "scores": scores,
        "penalty": penalty,
        "covariates": covariates,
    }


def _covariate_estimand(data: Comparisons, effects: str) -> str | None:
    """Return the estimand's ``covariates``: None for data without response covariates, else ``effects``."""
    return effects if data.p else None


def result_estimand(result: Any) -> dict[str, Any]:
    """Return the estimand record of a frequentist :class:`~pydial.DialResult` (compare :func:`posterior`'s ``attrs``).

    DIAL fits report their position effects from the LLM-only structured fit
    (``b = "llm-only"``); ``judges`` from each judge's own fit (``b = "judge"``).
    ``dial-ada`` at ``lambda = inf`` is the anchored estimator (``dial-anc``), at
    ``lambda = 0`` the human fit.  ``data`` is the fingerprint of the fit's data
    (:func:`~pydial.stan.schema.data_fingerprint`; ``None`` when the result does not carry them).
    """
    method = str(result.method)
    ties = getattr(result, "ties", None)
    lam = float(getattr(result, "lambda_", float("nan")))
    if method in ("dial-ada", "dial-nopos") and np.isinf(lam):
        method = "dial-anc" if method == "dial-ada" else method
    if method == "dial-ada" and lam == 0.0:
        method = "human"
    order = method != "dial-nopos"
    if method == "human":
        b, scores = "none", "s_H"
    elif method == "judges":
        b, scores = "judge", "s_judges"
    else:
        b, scores = ("llm-only" if order else "none"), "s_H"
    if method == "dial-anc":
        lam = float("inf")
    spec = getattr(result, "spec", None)
    covariates = None
    if getattr(result, "covariate_effects", None) is not None:
        covariates = getattr(spec, "covariate_effects", "judge") if method.startswith("dial") else "judge"
    out = _estimand(method, model={"human": "human", "judges": "judges"}.get(method, "dial"), rank=result.rank,
                    calibration=result.calibration, lam=lam, ties=ties, order=order, b=b, scores=scores,
                    penalty=getattr(result, "penalty", None), covariates=covariates)
    data = getattr(result, "data", None)
    out["data"] = data_fingerprint(data) if isinstance(data, Comparisons) else None
    return out


def _like_arguments(result: Any, data: Comparisons) -> dict[str, Any]:
    """Return the :func:`posterior` arguments whose posterior is that of ``result``'s estimator."""
    from ..exceptions import EstimandMismatchError

    est = result_estimand(result)
    m = est["method"]
    if est["penalty"] is not None:
        raise EstimandMismatchError(f"the fit is penalized ({est['penalty']}); pydial's posteriors use proper "
                                    "priors, not the Jeffreys penalty: refit without penalty",
                                    {"penalty": (est["penalty"], None)})
    if m == "human":
        return {"model": "human", "ties": est["ties"]}
    if m == "judges":
        return {"model": "judges", "ties": est["ties"], "include_human": False}
    if m in ("dial-ada", "dial-anc", "dial-nopos"):
        if getattr(result, "data", None) is not None and result.data is not data and (
                result.data.n_human != data.n_human or result.data.n_llm != data.n_llm):
            raise EstimandMismatchError("posterior(..., like=result): the data differ from the data of the fit "
                                        f"(n_H {data.n_human} vs {result.data.n_human}, n_LLM {data.n_llm} vs "
                                        f"{result.data.n_llm})")
        cal = None if est["calibration"] == "none" else est["calibration"]
        out = {"model": "dial", "rank": est["rank"], "calibration": cal, "ties": est["ties"], "order": est["order"],
               "b_stage": "llm-only", "covariate_effects": est["covariates"] or "judge"}
        out["lambda_"] = float("inf") if m == "dial-anc" else est["lambda_"]
        return out
    raise EstimandMismatchError(f"no posterior counterpart of method {m!r} in pydial.stan (available: human, judges, "
                                "dial-ada, dial-anc, dial-nopos)", {"method": (m, None)})


POSTERIOR_METHODS: tuple[str, ...] = ("dial-ada", "dial-anc", "dial-nopos", "judges", "human")
"""Methods of :func:`posterior`, in :func:`pydial.fit`'s vocabulary (``pooled`` and ``atc`` have no posterior)."""

POSTERIOR_RENAMED = {"model": "method", "lam": "lambda_"}
"""Old keyword names of :func:`posterior` (deprecated) and the names that replace them."""


@dataclass(frozen=True)
class _Request:
    """What a posterior estimates, resolved from :func:`posterior`'s arguments (the resolve step).

    ``model`` is the program family (``"dial"``: ``dial_sample.stan``; ``"judges"``,
    ``"human"``: ``judges.stan``); ``lambda_`` the weight ``lambda`` (None: the ordinary
    posterior, ``inf``: the cut posterior); ``order`` whether order effects are sampled.
    """

    model: str
    method: str
    rank: int
    calibration: str | None
    ties: str | None
    lambda_: float | None
    order: bool
    include_human: bool
    b_stage: str
    shared: bool = False


def _resolve(method: str, like: Any, spec: Any, data: Comparisons, deprecated: dict[str, Any], *, rank: Any,
             calibration: Any, ties: Any, lambda_: Any, include_human: Any, b_stage: Any,
             covariate_effects: Any = "judge") -> _Request:
    """Check what the posterior estimates and return it as a :class:`_Request`.

    The old ``model=`` / ``lam=`` / ``order=`` are translated with a warning; a
    ``spec`` (:class:`~pydial.ModelSpec`) or ``like`` (a fit) sets the estimand.
    """
    order = True
    if deprecated:
        old = renamed_arguments("posterior", deprecated, POSTERIOR_RENAMED, ("method", "lambda_", "order"))
        if "order" in old:
            warnings.warn("posterior(..., order=) is deprecated; use method='dial-nopos' (DIAL without order effects)",
                          DeprecationWarning, stacklevel=caller_stacklevel())
            order = bool(check_choice("order", old["order"], (True, False)))
        lambda_ = old.get("lambda_", lambda_)
        if "method" in old:
            model = check_choice("model", old["method"], ("dial", "judges", "human"))
            method = ("dial-ada" if order else "dial-nopos") if model == "dial" else model
    if spec is not None:
        method, rank, calibration, ties, lambda_ = _spec_arguments(spec)
        covariate_effects = spec.covariate_effects
    if like is not None:
        _check_like(like)
        kw = _like_arguments(like, data)
        method, ties = kw["model"], kw.get("ties")
        include_human = kw.get("include_human", include_human)
        if method == "dial":
            rank, calibration, order, lambda_, b_stage = kw["rank"], kw["calibration"], kw["order"], kw["lambda_"], kw["b_stage"]
            covariate_effects = kw["covariate_effects"]
            method = "dial-ada" if order else "dial-nopos"
    check_choice("covariate_effects", covariate_effects, COVARIATE_EFFECTS)
    if method in ("pooled", "atc"):
        raise ArgumentError(f"method {method!r} has no posterior counterpart in pydial.stan (available: "
                            f"{', '.join(POSTERIOR_METHODS)})")
    check_choice("method", method, POSTERIOR_METHODS)
    check_choice("ties", ties, tuple(TIES_CODE))
    check_choice("include_human", include_human, (True, False))
    model = "dial" if method.startswith("dial") else method
    if model != "dial":
        if lambda_ is not None:
            raise ArgumentError(f"lambda_ applies to the DIAL methods only, got lambda_={lambda_!r} with method={method!r}")
        return _Request(model, method, 0, None, ties, None, order, bool(include_human), "joint")
    rank = check_count(rank, "rank", minimum=0)
    check_choice("calibration", calibration, (None,) + tuple(CALIBRATIONS))
    check_choice("b_stage", b_stage, B_SOURCES)
    if method == "dial-anc":
        if lambda_ is not None and not (isinstance(lambda_, numbers.Real) and float(lambda_) == float("inf")):
            raise ArgumentError(f"method 'dial-anc' is the cut posterior (lambda_=inf), got lambda_={lambda_!r}; "
                                "use method='dial-ada' for a finite weight")
        lambda_ = float("inf")
    if lambda_ is not None:
        if isinstance(lambda_, bool) or not isinstance(lambda_, numbers.Real):
            raise ArgumentTypeError(f"lambda_ must be a number > 0 (inf: the cut posterior), got {lambda_!r}")
        if not float(lambda_) > 0:
            raise ArgumentError(f"lambda_ must be > 0 (inf: the cut posterior), got {lambda_!r}")
        lambda_ = float(lambda_)
    return _Request(model, method, rank, calibration, ties, lambda_, method != "dial-nopos", bool(include_human),
                    b_stage, covariate_effects == "shared")


def _check_like(like: Any) -> None:
    """Refuse a ``like=`` that is not a fit result (a method name, a spec, a posterior)."""
    if isinstance(like, str):
        raise ArgumentTypeError(f"like= takes a fit result (like=pydial.fit(data, ...)), got the string {like!r}; "
                                f"to name the estimator, pass method={like!r}")
    if isinstance(like, ModelSpec):
        raise ArgumentTypeError("like= takes a fit result (like=pydial.fit(data, ...)), got a ModelSpec; pass it "
                                "as spec=")
    if not all(hasattr(like, a) for a in ("method", "rank", "calibration")):
        raise ArgumentTypeError(f"like= takes a fit result (like=pydial.fit(data, ...)), got {type(like).__name__}; "
                                f"to name the estimator, pass method= (one of {', '.join(POSTERIOR_METHODS)})")


def _spec_arguments(spec: Any) -> tuple[str, Any, Any, Any, Any]:
    """Return ``(method, rank, calibration, ties, lambda_)`` of the posterior of a :class:`~pydial.ModelSpec`.

    A spec whose weight is selected (``dial-ada`` over a grid) has no single
    posterior weight: the ordinary posterior is taken unless the grid holds one
    value.  A rank grid or a penalized spec has no posterior counterpart.
    """
    from ..exceptions import EstimandMismatchError

    if not isinstance(spec, ModelSpec):
        raise ArgumentTypeError(f"spec must be a pydial.ModelSpec, got {type(spec).__name__}")
    if spec.penalty is not None:
        raise EstimandMismatchError(f"the spec is penalized ({spec.penalty}); pydial's posteriors use proper priors, "
                                    "not the Jeffreys penalty", {"penalty": (spec.penalty, None)})
    if spec.rank is not None and not isinstance(spec.rank, int):
        raise ArgumentError(f"a rank grid (rank={spec.rank!r}) has no single posterior: fit, then pass like=result")
    lam = spec.lambda_[0] if spec.lambda_ is not None and len(spec.lambda_) == 1 else None
    return spec.method, 1 if spec.rank is None else spec.rank, spec.calibration, spec.ties, lam


def _check_run_arguments(*, chains: Any, draws: Any, warmup: Any, seed: Any, adapt_delta: Any, max_depth: Any,
                         refresh: Any, init: Any, win_prob: Any, log_lik: Any, algorithm: Any, backend: Any) -> None:
    """Check the sampler's arguments of :func:`posterior` (each error names its argument)."""
    check_count(chains, "chains")
    check_count(draws, "draws")
    check_count(warmup, "warmup", minimum=0)
    check_seed(seed)
    check_level(adapt_delta, "adapt_delta")
    check_count(max_depth, "max_depth")
    if refresh is not None:
        check_count(refresh, "refresh")
    if isinstance(init, str):
        check_choice("init", init, ("spectral", "random"))
    elif not (isinstance(init, Sequence) and all(isinstance(i, Mapping) for i in init)) or len(init) != chains:
        raise ArgumentError(f"init must be 'spectral', 'random' or a list of one dict per chain ({chains}), got {init!r}")
    check_choice("win_prob", win_prob, (None, True, False))
    check_choice("log_lik", log_lik, LOG_LIK_UNITS)
    check_choice("algorithm", algorithm, ALGORITHMS)
    check_choice("backend", backend, (None,) + BACKENDS)


def check_extra(program: str, extra: Mapping[str, Any] | None, model: str) -> None:
    """Check ``extra`` against the ``data`` block of ``program``, before it is compiled.

    The program reads the data of the shipped program of ``model`` (its schema)
    plus its own; ``extra`` must give exactly the latter.  Raises
    :class:`~pydial.ArgumentError` naming the unknown or missing entries.
    """
    declared = data_names(program)
    schema = set(data_names("dial_sample" if model == "dial" else "judges"))
    own = [n for n in declared if n not in schema]
    given = set(extra or {})
    unknown = sorted(given - set(declared))
    if unknown:
        raise ArgumentError(f"extra data {unknown} are not declared in the data block of {program}; it reads "
                            f"{own or 'no data'} beyond the schema of pydial's {model!r} programs")
    missing = [n for n in own if n not in given]
    if missing:
        raise ArgumentError(f"{program} declares the data {missing} that pydial does not provide: pass them with "
                            "extra={...}")


def posterior(
    data: Comparisons,
    method: str = DEFAULT_METHOD,
    *,
    rank: int = 1,
    calibration: str | None = "mu",
    ties: str | None = None,
    lambda_: float | None = None,
    chains: int = 4,
    draws: int = 1000,
    warmup: int = 1000,
    seed: int | None = None,
    priors: Mapping[str, float] | None = None,
    backend: str | None = None,
    init: str | Sequence[Mapping[str, Any]] = "spectral",
    adapt_delta: float = 0.9,
    max_depth: int = 10,
    win_prob: bool | None = None,
    include_human: bool = True,
    program: str | None = None,
    extra: Mapping[str, Any] | None = None,
    like: Any = None,
    b_stage: str = "joint",
    refresh: int | None = None,
    quiet: bool = True,
    progress: bool | None = None,
    log_lik: str = "cell",
    algorithm: str = "nuts",
    spec: Any = None,
    covariate_effects: str = "judge",
    **deprecated: Any,
) -> Any:
    r"""Sample a DIAL model's posterior with NUTS (or approximate it) and return it as arviz data.

    Parameters
    ----------
    data : Comparisons
        Validated judgments.
    method : {"dial-ada", "dial-anc", "dial-nopos", "judges", "human"}, default "dial-ada"
        The estimator whose posterior is sampled, in :func:`pydial.fit`'s
        vocabulary; the default is :func:`pydial.fit`'s and the command line's
        (:data:`pydial.estimation.spec.DEFAULT_METHOD`).  ``"dial-ada"``:
        ``dial_sample.stan``, the structured model with the LLM weight
        ``lambda_`` (default: the ordinary posterior);
        ``"dial-anc"``: its cut posterior (``lambda = inf``); ``"dial-nopos"``:
        ``"dial-ada"`` without order effects; ``"judges"``: each LLM judge's own
        order-effect model (``S``, and ``s_judges``, the mean of the judges'
        scores, which is what ``pydial.fit(method="judges")`` reports) plus the
        people's own scores ``s_H`` (``include_human``); ``"human"``: the people
        alone (BTL, or a tie model with ``ties``).  ``pooled`` and ``atc`` have no
        posterior counterpart.
    rank : int, default 1
        Disagreement rank ``r`` (the DIAL methods).
    calibration : {"mu", "W"} or None, default "mu"
        Human calibration basis (``None``: LLM judges only).
    ties : {None, "davidson", "rao-kupper"}
        ``"davidson"``: use the tie outcomes (:meth:`Comparisons.tie_cells`)
        with a Davidson tie parameter per judge and one for the people, with
        the Davidson-Beaver order effect; ``"rao-kupper"``: the Rao-Kupper
        threshold model instead; ``None``: decisive outcomes only.
    chains, draws, warmup : int
        NUTS chains, post-warmup draws per chain, warmup iterations.
    seed : int, optional
        Random seed of the sampler and of the initial-value jitter.
    lambda_ : float, optional
        LLM weight ``lambda`` of eq. weighted-loss: the LLM log-likelihood is
        multiplied by ``lambda n_H / n_LLM`` (a power posterior whose
        log-likelihood is ``-n_H Q_lambda``).  Default ``None`` = weight 1, the
        ordinary posterior (``lambda = n_LLM / n_H``).  ``lambda_=inf`` (the
        default of ``method="dial-anc"``) is the anchored estimator's
        counterpart, the *cut* posterior: the LLM structure from the LLM-only
        posterior, then the calibration ``c`` given each draw of the basis ``M``
        from the human judgments alone (``stan/dial_calibrate.stan``).  The DIAL
        methods only.
    priors : mapping, optional
        Overrides of the default priors, which are tabulated, with what each
        scale means, in :data:`pydial.stan.schema.DIAL_SAMPLE_PRIORS`
        (DIAL methods: normal priors on the mean judge score ``S'1/K``, the
        deviations of ``gamma``, the item side ``Z`` of ``U V' = P Z'`` with a
        uniform judge frame ``P``, ``b``, ``c`` and ``log nu``) and
        :data:`~pydial.stan.schema.JUDGES_PRIORS` (``"judges"`` and
        ``"human"``); the program headers state the same priors.  A scale of 0
        makes that block flat.  ``attrs["priors"]`` records the priors used.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`pydial.stan.stan_backend`.
    init : "spectral", "random" or list of dict
        ``"spectral"`` (default; the name is kept for compatibility) means the
        point fits' start :func:`pydial.estimation.glm.initial_theta`: with
        a DIAL method each chain starts there, jittered (ridge judge-wise
        BTL fits, the consensus SVD of their scores and the people's scores
        projected on the calibration basis); the other models start as with
        ``"random"``.  ``"random"``: Stan's uniform(-2, 2) start on the
        unconstrained scale.  Or one dict of initial values per chain.
    adapt_delta, max_depth : float, int
        NUTS target acceptance rate and maximum tree depth.
    win_prob : bool, optional
        Store the ``N x N`` human win probabilities: ``win_prob[i, j]`` is the
        probability that people prefer item ``i`` to item ``j`` in one comparison,
        the family's ``P(i wins)`` at ``eta = s_H[i] - s_H[j]`` with the people's
        ``nu`` (:func:`pydial.model.families.Family.probabilities`, first column):
        ``sigma(s_i - s_j)`` without ties; a tie is not a win (default: when ``N <= 30``).
    include_human : bool
        ``method="judges"``: add the people (their own scores ``s_H``).
    program : str, optional
        Path to a ``.stan`` file to sample instead of the shipped program of
        ``method`` (``dial_sample.stan`` or ``judges.stan``): the shipped
        program's ``#include`` lines plus its additions (README "Extending a
        Stan program"), reading the same data (the shared schema of
        :func:`pydial.stan.schema`) plus ``extra``; the names of ``extra``
        are checked against the program's ``data`` block before anything is
        compiled.  Its ``#include`` lines
        find pydial's include files.  Every variable it outputs goes to the
        posterior group (dimensions named as for the shipped program where the
        names agree); it must write ``log_lik`` and ``counts_rep`` as the
        shipped programs do.  The program's own variables (those the shipped
        program does not output) are labelled by their sizes, axis by axis: an
        axis of size ``K`` (the LLM judges) gets the dimension ``judge`` with the
        judges' names; ``K + 1`` (the program's group index: the judges, then the
        people at index ``K + 1`` in Stan) gets ``judge_human`` with the judges'
        names and ``data.human_judge`` (``"human"``); ``N`` gets ``item`` with the
        items' names.  A repeated dimension is suffixed (``item``, ``item_j``); a
        size that two of these share (e.g. ``K = N``) labels nothing, and an
        unlabelled axis is ``<name>_dim_<axis>`` (0-based).  E.g. the ``vector[K + 1]
        kappa`` of :func:`pydial.stan.example_program` ``("tie_gap")`` comes back as
        ``kappa`` over ``judge_human``.
    extra : mapping, optional
        More data for ``program``.
    like : DialResult, optional
        Sample the posterior of exactly this fit's estimator: its model,
        rank, calibration, weight ``lambda`` (``dial-ada`` at its selected
        weight, ``dial-anc`` as the cut posterior ``lambda_=inf``), tie model and
        order-effect convention.  Overrides ``method``, ``rank``,
        ``calibration``, ``ties``, ``lambda_``, ``include_human`` and
        ``b_stage``.  Raises :class:`~pydial.exceptions.EstimandMismatchError`
        for a fit without a posterior counterpart (``pooled``, ``atc``, a
        penalized fit), :class:`~pydial.ArgumentTypeError` for anything but a
        fit result (a method's name goes to ``method=``, a spec to ``spec=``).
    b_stage : {"joint", "llm-only"}
        DIAL methods: where the posterior's order effects ``b`` come from.
        ``"joint"`` (default): the (weighted) joint posterior;
        ``"llm-only"``: a second NUTS run of the LLM-only structured model at
        weight 1, the counterpart of the frequentist DIAL fits, whose position
        effects come from their LLM-only stage (``b_joint`` then keeps the
        joint posterior's draws).  The two runs are independent: do not read
        joint quantities of ``b`` with the other variables.  (``lambda_=inf`` is
        always ``"llm-only"``.)
    refresh : int, optional
        Progress-report interval of the sampler (iterations); shown only with
        ``quiet=False``.
    quiet : bool, default True
        Keep the backends' progress output and log messages off the console
        (a compilation is still announced by one line on stderr).
    progress : bool, optional
        A ``tqdm`` progress bar instead of the backends' progress lines
        (httpstan: one bar over all chains; CmdStan: cmdstanpy's bar per
        chain).  Default: shown only when stderr is a terminal.
    log_lik : {"cell", "judgment"}, default "cell"
        Unit of the pointwise log-likelihood (and of ``observed_data`` and
        ``posterior_predictive``).  ``"cell"`` (default): one value per
        aggregated cell ``(judge, i, j, a)``, so LOO leaves out a whole cell;
        ``"judgment"``: one value per judgment (dimension ``judgment``,
        labels ``cell/outcome#n``), for leave-one-judgment-out LOO.  The
        posterior is the same (the programs then read one cell per judgment,
        which only drops the constant multinomial coefficients; sampling
        takes longer on large data).
    algorithm : {"nuts", "laplace", "pathfinder"}, default "nuts"
        ``"nuts"``: Stan's NUTS (``chains`` x ``draws`` after ``warmup``).  The two
        fast approximations are CmdStan's (``backend="cmdstanpy"``; httpstan has
        neither and raises :class:`~pydial.stan.StanBackendError`), each giving
        ``chains * draws`` draws as one chain: ``"laplace"``, the normal
        approximation at the posterior mode on the unconstrained scale (Jacobian
        included), mapped back; ``"pathfinder"``, multi-path Pathfinder with
        importance resampling.  Same estimand record, layout and
        :func:`~pydial.stan.compare_intervals` support as NUTS; ``sample_stats``
        holds the approximation's log densities instead of NUTS statistics, and
        R-hat / ESS are not computed (the draws are independent).  The second
        stage of the cut posterior (``lambda_=inf``) stays NUTS: it is exact given
        each first-stage draw.
    spec : ModelSpec, optional
        Sample the posterior of a model specification (``result.spec`` of a
        fit, or :class:`pydial.ModelSpec` built by hand): its method, rank,
        calibration, tie family, ``covariate_effects`` and, when it holds a single
        weight, ``lambda_``.  Overrides ``method``, ``rank``, ``calibration``, ``ties``,
        ``covariate_effects`` and ``lambda_``.
    covariate_effects : {"judge", "shared"}, default "judge"
        With data that carry response covariates (``Comparisons.from_frame(...,
        covariates=)``) every program adds ``z' beta`` to the linear predictor:
        ``"judge"`` gives each LLM judge its own effects, ``"shared"`` one row for all
        LLM judges (DIAL methods); the people have their own.  The posterior then has
        ``beta`` over ``(beta_judge, covariate)`` (prior ``beta_sd`` of the priors
        tables), and the scores are style-controlled, as in :func:`pydial.fit`.
    **deprecated
        The old names ``model=`` (``"dial"``, ``"judges"``, ``"human"``),
        ``lam=`` and ``order=`` still work with a :class:`DeprecationWarning`
        (``model="dial", order=False`` is ``method="dial-nopos"``).

    Returns
    -------
    xarray.DataTree or arviz.InferenceData
        An ``xarray.DataTree`` on arviz 1.x, an ``arviz.InferenceData`` on arviz 0.x
        (:mod:`pydial.stan.idata`), with the same groups, coordinates and ``attrs``:
        groups ``posterior``, ``log_likelihood`` (``log_lik``, dim ``cell``),
        ``posterior_predictive`` (replicated ``wins_i, wins_j, ties``, dim
        ``cell``), ``observed_data``, ``sample_stats``.  ``attrs["estimand"]``
        (JSON) records what the posterior estimates: ``method`` (the
        frequentist method it corresponds to), ``model``, ``rank``,
        ``calibration``, ``lambda_`` (the weight ``lambda``; ``inf`` for the cut
        posterior), ``ties``, ``order``, ``b`` (``"joint"``, ``"llm-only"``,
        ``"judge"`` or ``"none"``), ``scores`` (the posterior variable that
        holds the method's scores); :func:`pydial.stan.compare_intervals`
        checks a fit against it.  ``attrs["sampler_problems"]`` lists the
        problems found (JSON list of strings); ``attrs["sampler_diagnostics"]``
        (JSON) has R-hat, bulk and tail ESS per monitored scalar, named by the
        coordinates (``s_H[gpt-4]``).

    Raises
    ------
    pydial.ArgumentTypeError
        ``data`` is not a :class:`~pydial.Comparisons` (a DataFrame: build it with
        ``Comparisons.from_frame``), or ``like`` is not a fit result.
    pydial.ArgumentError
        A bad argument (naming it), before anything is compiled or sampled.
    pydial.DataError
        Data the method cannot use (no LLM judgments, no human comparisons).

    Warns
    -----
    SamplerWarning
        Divergences, tree-depth saturation, low E-BFMI, R-hat > 1.01 or bulk /
        tail ESS below 100 per chain on the identified quantities, and (``dial``)
        a consensus strength near 0: a posterior near ``S' 1 = 0``, where the mean
        judge score no longer carries the consensus direction ``mu`` (the trap that
        ``dial_sample.stan``'s parameterization keeps the sampler away from).

    Examples
    --------
    The people's Bradley-Terry posterior on simulated data (needs a Stan backend; the
    program is compiled on first use):

    >>> import json
    >>> import pydial
    >>> sim = pydial.simulate(N=4, K=2, rank=1, n_llm=2000, n_human=400, seed=1)
    >>> idata = pydial.posterior(sim.comparisons, "human", chains=2, draws=200, seed=1)
    >>> idata.posterior["s_H"].dims
    ('chain', 'draw', 'item')
    >>> json.loads(idata.attrs["estimand"])["method"]
    'human'
    """
    data = require_comparisons(data)
    azio.arviz()  # a supported arviz, before any compile or sampling
    req = _resolve(method, like, spec, data, deprecated, rank=rank, calibration=calibration, ties=ties,
                   lambda_=lambda_, include_human=include_human, b_stage=b_stage, covariate_effects=covariate_effects)
    _check_run_arguments(chains=chains, draws=draws, warmup=warmup, seed=seed, adapt_delta=adapt_delta,
                         max_depth=max_depth, refresh=refresh, init=init, win_prob=win_prob, log_lik=log_lik,
                         algorithm=algorithm, backend=backend)
    merge_priors(DIAL_SAMPLE_PRIORS if req.model == "dial" else JUDGES_PRIORS, priors,
                 "dial_sample.stan" if req.model == "dial" else "judges.stan")
    if extra and program is None:
        raise ArgumentError("extra data are for a user's program: pass program=PATH")
    if program is not None:
        check_extra(program, extra, req.model)
    rng = np.random.default_rng(seed)
    stan_seed = int(rng.integers(1, 2**31 - 1)) if seed is None else int(seed)
    run: dict[str, Any] = dict(chains=chains, draws=draws, warmup=warmup, adapt_delta=adapt_delta, max_depth=max_depth,
                               refresh=refresh, quiet=quiet, progress=progress, algorithm=algorithm)
    options: dict[str, Any] = dict(priors=priors, init=init, rng=rng, seed=stan_seed, program=program, extra=extra,
                                   win_prob=data.N <= 30 if win_prob is None else win_prob, backend=backend, run=run,
                                   per_judgment=log_lik == "judgment")
    sampled = _sample_dial(data, req, **options) if req.model == "dial" else _sample_judges(data, req, **options)
    if program is not None:
        _add_user_variables(sampled, data, str(program))
    problems = _problems(sampled, req.model)
    if problems:
        warnings.warn("Stan sampler problems:\n  - " + "\n  - ".join(problems), SamplerWarning, stacklevel=2)
    return _convert(data, req, sampled, problems, per_judgment=log_lik == "judgment", seed=stan_seed, run=run)


@dataclass
class _Sampled:
    """The draws of one posterior and how to lay them out (the output of the run step of :func:`posterior`)."""

    res: SampleResult
    d: Mapping[str, Any]                 # the data of the (first) program
    cells: list[CellTable]               # the aggregated cells, LLM then human
    post: dict[str, np.ndarray]          # the posterior group
    dims: dict[str, list[str]]
    coords: dict[str, list[str]]
    monitor: list[str]                   # the variables whose R-hat and ESS are checked
    estimand: dict[str, Any]
    program: str
    priors: dict[str, float]
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    single_run: bool = True              # one run of one program (CmdStan: arviz's own converter applies)


def _sample_dial(data: Comparisons, req: _Request, *, priors: Mapping[str, float] | None, init: Any,
                 rng: np.random.Generator, seed: int, win_prob: bool, program: str | None,
                 extra: Mapping[str, Any] | None, backend: str | None, run: dict[str, Any],
                 per_judgment: bool) -> _Sampled:
    """Run ``dial_sample.stan``, then ``dial_calibrate.stan`` (the cut posterior) or the LLM-only run of ``b``.

    The second run is made for ``lambda = inf`` and for ``b_stage="llm-only"`` respectively.
    """
    if data.K < 1 or data.n_llm == 0:
        raise DataError(f"method {req.method!r} needs LLM judgments")
    if req.calibration is not None and data.n_human == 0:
        raise DataError("a calibrated posterior needs decisive human comparisons; pass calibration=None")
    if req.lambda_ is None:
        w_llm, lam_eff = 1.0, (data.n_llm / data.n_human if data.n_human else float("nan"))
    else:
        lam_eff = req.lambda_
        w_llm = lam_eff * data.n_human / data.n_llm if np.isfinite(lam_eff) else 1.0
    cut = bool(np.isinf(lam_eff)) and req.calibration is not None
    if cut and program is not None:
        raise ArgumentError("lambda_=inf (the cut posterior, method 'dial-anc') samples the shipped programs only")
    rank, calibration, ties, order, b_stage = req.rank, req.calibration, req.ties, req.order, req.b_stage
    res, d, cells, post, dims, coords = _run_dial(
        data, rank=rank, calibration=None if cut else calibration, ties=ties, w_llm=w_llm, priors=priors,
        order=order, init=init, rng=rng, seed=seed, win_prob=win_prob, program=program, extra=extra,
        backend=backend, run=run, per_judgment=per_judgment, shared=req.shared)
    out = _Sampled(res, d, cells, post, dims, coords, ["s_H", "S", "gamma", "b", "nu", "beta", "consensus_scale"], {},
                   "dial_sample" + ("+dial_calibrate" if cut else ""), merge_priors(DIAL_SAMPLE_PRIORS, priors,
                                                                                  "dial_sample.stan"))
    if cut:
        assert calibration is not None  # cut requires a calibration
        out.res, out.cells, out.post, out.dims, out.coords, p2 = _cut_stage(
            data, res, d, cells[0], post, dims, coords, rank=rank, calibration=calibration, ties=ties, priors=priors,
            seed=seed, backend=backend, run=run, win_prob=win_prob, per_judgment=per_judgment)
        out.problems += p2
        out.single_run = False
        b_stage = "llm-only"
        out.notes.append("cut posterior (lam = inf, the counterpart of dial-anc): mu, gamma, U, V, S, b and the "
                         "judges' nu (and beta) from the LLM-only posterior; c, s_H and the people's nu (and beta) "
                         "from dial_calibrate.stan, one calibration per first-stage draw")
    elif order and b_stage == "llm-only":
        res_b, _, _, post_b, _, _ = _run_dial(
            data, rank=rank, calibration=None, ties=ties, w_llm=1.0, priors=priors, order=order, init=init,
            rng=rng, seed=seed + 1, win_prob=False, program=None, extra=None, backend=backend, run=run,
            shared=req.shared)
        post["b_joint"] = post["b"]
        dims["b_joint"] = ["judge"]
        post["b"] = post_b["b"]
        res.draws["b"] = res_b.draws["b"]
        out.single_run = False
        out.problems += [f"LLM-only run (b): {p}" for p in res_b.check(
            monitor=["b"], warn=False, labels={"b": [list(data.judges)]})]
        out.notes.append("b from a separate NUTS run of the LLM-only structured model at weight 1 (the convention "
                         "of the frequentist DIAL fits); b_joint: the joint posterior's b")
    if calibration is None:
        method = "llm-only"
    else:
        method = ("dial-anc" if cut else "dial-ada") if order else "dial-nopos"
    out.estimand = _estimand(method, model="dial", rank=rank, calibration=calibration, lam=lam_eff, ties=ties,
                             order=order, b=(b_stage if order else "none"),
                             scores="s_H" if calibration is not None else None,
                             covariates=_covariate_estimand(data, "shared" if req.shared else "judge"))
    return out


def _sample_judges(data: Comparisons, req: _Request, *, priors: Mapping[str, float] | None, init: Any,
                   rng: np.random.Generator, seed: int, win_prob: bool, program: str | None,
                   extra: Mapping[str, Any] | None, backend: str | None, run: dict[str, Any],
                   per_judgment: bool) -> _Sampled:
    """Run ``judges.stan``: each LLM judge's own model and the people's (``judges``), or the people alone (``human``)."""
    model, ties, order = req.model, req.ties, req.order
    tie = ties is not None
    if model == "judges" and data.n_llm == 0:
        raise DataError("method 'judges' needs LLM judgments")
    with_human = model == "human" or (req.include_human and data.n_human > 0)
    Hc = human_cell_table(data, ties=tie) if with_human else None
    if Hc is not None and len(Hc) == 0:
        raise DataError("no human comparisons")
    K = data.K if model == "judges" else 0
    Lc = llm_cell_table(data, ties=tie) if K else CellTable.empty()
    cells = [Lc] + ([Hc] if Hc is not None else [])
    if per_judgment:
        Lc = Lc.per_judgment()
        Hc = Hc.per_judgment() if Hc is not None else None
    d = with_extra(judges_data(Lc, Hc, N=data.N, K=K, order=order and K > 0, ties=ties, priors=priors), extra)
    inits = None if isinstance(init, str) else list(init)  # judges.stan is log-concave per judge: Stan's start is fine
    res = _draw(compile_model(program or "judges", backend=backend), d, seed=seed, inits=inits, run=run)
    judges = list(data.judges)
    post: dict[str, np.ndarray] = {}
    dims: dict[str, list[str]] = {}
    coords: dict[str, list[str]] = {"item": list(data.items)}
    if K:
        post["S"], dims["S"], coords["judge"] = res.draws["S"], ["judge", "item"], judges
        post["s_judges"], dims["s_judges"] = res.draws["S"].mean(axis=2), ["item"]
        res.draws["s_judges"] = post["s_judges"]
        if order:
            post["b"], dims["b"] = res.draws["b"], ["judge"]
    if with_human:
        post["s_H"], dims["s_H"] = res.draws["s_H"], ["item"]
    if tie:
        post["nu"], dims["nu"] = res.draws["nu"], ["tie_judge"]
        coords["tie_judge"] = judges[:K] + ([data.human_judge] if with_human else [])
    _covariate_posterior(res.draws, d, judges[:K] + [data.human_judge], list(data.covariates), post, dims, coords)
    if model == "human":
        est = _estimand("human", model="human", rank=None, calibration=None, lam=float("nan"), ties=ties,
                        order=False, b="none", scores="s_H", covariates=_covariate_estimand(data, "judge"))
    else:
        est = _estimand("judges", model="judges", rank=None, calibration=None, lam=float("nan"), ties=ties,
                        order=order, b="judge" if order else "none", scores="s_judges",
                        covariates=_covariate_estimand(data, "judge"))
    return _Sampled(res, d, cells, post, dims, coords, list(post), est, "judges",
                    merge_priors(JUDGES_PRIORS, priors, "judges.stan"))


USER_DIM_SUFFIXES: tuple[str, ...] = ("", "_j", "_k")
"""Suffixes of a labelled dimension that occurs more than once in one variable (``item``, ``item_j``, ``item_k``)."""


def user_axes(data: Comparisons, d: Mapping[str, Any]) -> dict[int, tuple[str, list[str]]]:
    """Return the sizes that label an axis of a user's variable: size -> (dimension, labels).

    ``K`` (the LLM judges of the program's data): dimension ``judge``, the judges'
    names; ``K + 1`` (the judges, then the people, the program's group index):
    ``judge_human``, the judges' names and ``data.human_judge``; ``N``: ``item``, the
    items' names.  A size shared by two of them (e.g. ``K = N``) labels nothing.
    """
    K, N = int(d["K"]), int(d["N"])
    judges = list(data.judges)[:K]
    candidates = [(K, "judge", judges), (K + 1, "judge_human", judges + [data.human_judge]), (N, "item", list(data.items))]
    sizes = [size for size, _, _ in candidates]
    return {size: (dim, labels) for size, dim, labels in candidates if size > 0 and sizes.count(size) == 1}


def user_dims(name: str, shape: Sequence[int], axes: Mapping[int, tuple[str, list[str]]],
              coords: dict[str, Any]) -> list[str] | None:
    """Return the dimensions of a user's variable of ``shape`` (no chain, draw), adding their labels to ``coords``.

    An axis whose size is in ``axes`` (:func:`user_axes`) gets that dimension (suffixed
    by :data:`USER_DIM_SUFFIXES` when it repeats); any other axis ``<name>_dim_<axis>``
    (arviz's default).  ``None`` when no axis is labelled.
    """
    dims: list[str] = []
    for axis, size in enumerate(shape):
        dim = f"{name}_dim_{axis}"
        base, labels = axes.get(int(size), ("", []))
        free = [base + suffix for suffix in USER_DIM_SUFFIXES if base and base + suffix not in dims]
        if free:
            dim = free[0]
            coords[dim] = labels
        dims.append(dim)
    return dims if any(not dm.startswith(f"{name}_dim_") for dm in dims) else None


def _add_user_variables(s: _Sampled, data: Comparisons, program: str) -> None:
    """Add every variable a user's program outputs to the posterior group, labelled by :func:`user_dims`.

    Variables that the shipped program also outputs keep its dimensions; ``log_lik`` and
    ``counts_rep`` go to their own groups.
    """
    axes = user_axes(data, s.d)
    for name, v in s.res.draws.items():
        if name in s.post or name in ("log_lik", "counts_rep"):
            continue
        s.post[name] = v
        dims = user_dims(name, np.shape(v)[2:], axes, s.coords)
        if dims is not None:
            s.dims[name] = dims
    s.program = program
    s.estimand["method"] = "user program"


def _problems(s: _Sampled, model: str) -> list[str]:
    """Return the sampler's problems: divergences, R-hat / ESS of the monitored variables, the consensus trap."""
    labels = {k: [s.coords[dm] for dm in s.dims[k]] for k in s.post
              if k in s.dims and all(dm in s.coords for dm in s.dims[k])}
    problems = s.res.check(monitor=s.monitor, warn=False, labels=labels) + s.problems
    if model == "dial" and "consensus_strength" in s.res.draws:
        q05 = float(np.quantile(s.res.draws["consensus_strength"], 0.05))
        if q05 < CONSENSUS_STRENGTH_MIN:
            problems.append(
                f"consensus strength ||S'1|| / (sqrt(K) ||S||_F) has 5% posterior quantile {q05:.3f} < "
                f"{CONSENSUS_STRENGTH_MIN}: the posterior approaches S'1 = 0, where the judges' mean score no "
                "longer carries the consensus direction mu; compare with the MLE (pydial.fit) and consider tighter "
                "priors on the judges' deviations from the consensus loading (gamma_dev, priors={'gamma_sd': ...}, "
                f"default {DIAL_SAMPLE_PRIORS['gamma_sd']}) and on the disagreement (Z_raw, priors={{'Z_sd': ...}}, "
                f"default {DIAL_SAMPLE_PRIORS['Z_sd']})"
            )
    return problems


def _convert(data: Comparisons, req: _Request, s: _Sampled, problems: list[str], *, per_judgment: bool, seed: int,
             run: dict[str, Any]) -> Any:
    """Lay the draws out as arviz data: groups, coordinates, the estimand record and the diagnostics in ``attrs``."""
    unit = "judgment" if per_judgment else "cell"
    items, names = list(data.items), list(data.judges) + [data.human_judge]
    cells = s.cells
    if per_judgment:  # cells holds the aggregated tables: label and count the judgments of each cell
        cell_labels = [lab for c in cells for lab in c.judgment_labels(items, names)]
        cells = [c.per_judgment() for c in cells]
    else:
        cell_labels = [lab for c in cells for lab in c.labels(items, names)]
    coords = {**s.coords, unit: cell_labels}
    obs = _observed(cells)
    res = s.res
    rep = np.asarray(res.draws["counts_rep"]).reshape(res.chains, res.draws_per_chain, len(cell_labels), 3)
    pp = {"wins_i": rep[..., 0].astype(np.int64), "wins_j": rep[..., 1].astype(np.int64),
          "ties": rep[..., 2].astype(np.int64)}
    diag = res.diagnostics
    dial = req.model == "dial"
    attrs = {
        "inference_library": "pydial.stan",
        "program": s.program,
        "model": req.model,
        "backend": res.backend,
        "rank": int(req.rank) if dial else -1,
        "calibration": str(req.calibration) if dial else "none",
        "ties": str(req.ties),
        "order": int(req.order),
        "lambda_": req.lambda_ if req.lambda_ is not None else float("nan"),
        "llm_weight": float(s.d.get("cell_w", np.ones(1))[0]) if len(s.d.get("cell_w", [])) else float("nan"),
        "b_source": s.estimand["b"],
        "log_lik_unit": unit,
        "estimand": json.dumps({**s.estimand, "data": data_fingerprint(data)}),
        "notes": json.dumps(s.notes),
        "priors": json.dumps(s.priors),
        "chains": run["chains"],
        "draws": run["draws"],
        "warmup": run["warmup"],
        "seed": seed,
        "algorithm": run["algorithm"],
        "sampling_seconds": float(res.seconds),
        "sampler_problems": json.dumps(problems),
        "sampler_diagnostics": (diag.reset_index().to_json(orient="records") if diag is not None else "[]"),
    }
    all_dims = {**s.dims, "log_lik": [unit], "wins_i": [unit], "wins_j": [unit], "ties": [unit]}
    if res.backend_fit is not None and s.single_run:  # CmdStan: arviz's own converter, then the same layout
        return _from_cmdstanpy(res, s.post, pp, obs, coords, all_dims, attrs)
    return azio.build({"posterior": s.post, "log_likelihood": {"log_lik": res.draws["log_lik"]},
                       "posterior_predictive": pp, "observed_data": obs, "sample_stats": _sample_stats(res)},
                      coords=coords, dims=all_dims, attrs=attrs)


def _from_cmdstanpy(res: SampleResult, post: Mapping[str, np.ndarray], pp: Mapping[str, np.ndarray],
                    obs: Mapping[str, np.ndarray], coords: Mapping[str, Any], dims: Mapping[str, list[str]],
                    attrs: Mapping[str, Any]) -> Any:
    """Return the arviz data of a CmdStan run through ``arviz.from_cmdstanpy``, in pydial's layout (DataTree or InferenceData).

    arviz reads the posterior, ``log_lik`` and the sampler statistics from the
    CmdStan fit; pydial keeps the posterior variables of :func:`posterior` (the
    identified quantities, plus derived ones computed from the draws, such as
    ``s_judges``) and adds the replicated counts split into the three outcome
    variables (``posterior_predictive``) and ``observed_data``.
    """
    import xarray as xr

    fit = res.backend_fit
    from_fit = [k for k in post if k in fit.metadata.stan_vars]
    with azio.quiet_arviz():
        idata = azio.arviz().from_cmdstanpy(
            posterior=fit, log_likelihood={"log_lik": "log_lik"}, coords=dict(coords),
            dims={k: v for k, v in dims.items() if k in from_fit or k == "log_lik"},
        )
    full = azio.group_dataset(idata, "posterior")
    ds = full[from_fit]
    for k in post:  # derived quantities (not Stan variables)
        if k not in from_fit:
            ds[k] = xr.DataArray(post[k], dims=("chain", "draw", *dims.get(k, [f"{k}_dim_{i}" for i in range(
                np.ndim(post[k]) - 2)])), coords={dm: coords[dm] for dm in dims.get(k, []) if dm in coords})
    ds = ds[list(post)]
    ds.attrs.update(full.attrs)
    ss = azio.group_dataset(idata, "sample_stats")
    keep = [v for v in ("lp", "acceptance_rate", "step_size", "tree_depth", "n_steps", "diverging", "energy")
            if v in ss]
    ss = ss[keep]
    for v in ("tree_depth", "n_steps"):
        if v in ss:
            ss[v] = ss[v].astype(np.int64)
    if "diverging" in ss:
        ss["diverging"] = ss["diverging"].astype(bool)
    extra = azio.build({"posterior_predictive": pp, "observed_data": obs}, coords=coords, dims=dims, attrs={})
    return azio.assemble({"posterior": ds, "log_likelihood": azio.group_dataset(idata, "log_likelihood"),
                          "sample_stats": ss, "posterior_predictive": azio.group_dataset(extra, "posterior_predictive"),
                          "observed_data": azio.group_dataset(extra, "observed_data")},
                         {**attrs, "converter": "arviz.from_cmdstanpy"})


def _draw(cm: CompiledModel, d: Mapping[str, Any], *, seed: int, inits: Sequence[Mapping[str, Any]] | None,
          run: Mapping[str, Any]) -> SampleResult:
    """One posterior run: NUTS with the run's settings, or ``chains * draws`` draws of an approximation."""
    nuts = {k: v for k, v in run.items() if k != "algorithm"}
    if run.get("algorithm", "nuts") == "nuts":
        return cm.sample(d, seed=seed, inits=inits, **nuts)
    return cm.approximate(d, algorithm=run["algorithm"], draws=int(run["chains"]) * int(run["draws"]), seed=seed,
                          init=inits[0] if inits else None, quiet=bool(run["quiet"]))


def _calibration_modes(M: np.ndarray, Hc: CellTable, prior_sd: float) -> np.ndarray:
    """Posterior modes of ``c_t`` given ``M_t`` (binary human cells, normal prior), one per draw ``t``.

    Each is the one GLM solver's ridge fit (:func:`pydial.estimation.glm.glm`, ridge = the prior's
    precision) held in the box ``|c| <= BOX`` of the point fits, so that separated data (a flat
    prior, no finite mode) give a start on the box instead of an overflow.  With covariates the
    GLM is in ``(c_t, beta_t)`` (design ``[D_H M_t, Z_H]``, the same ridge): rows ``(c_t, beta_t)``.
    """
    from pydial.estimation.glm import glm
    from pydial.model.glm import binary_counts
    from pydial.model.design import calibration_design, dense_design

    counts = binary_counts((Hc.wins_i + Hc.wins_j).astype(float), Hc.wins_i.astype(float))
    ridge = 1.0 / prior_sd**2 if prior_sd > 0 else 1e-8
    return np.array([glm(None, counts, dense_design(calibration_design(Hc.i, Hc.j, M.shape[1], M_t, Hc.z)),
                         ridge=ridge, bound=BOX).x for M_t in M])


def estimand(idata: Any) -> dict[str, Any] | None:
    """Return the estimand record of a posterior from :func:`posterior` (``None`` when it has none).

    Read from the root ``attrs`` of the DataTree / InferenceData, else from its
    ``posterior`` group (:func:`pydial.stan.idata.posterior_attrs`).
    """
    raw = azio.posterior_attrs(idata).get("estimand")
    if raw is None:
        return None
    record = json.loads(raw)
    if "lam" in record:  # written before the weight was named lambda_ everywhere
        record["lambda_"] = record.pop("lam")
    return record


def _run_dial(data: Comparisons, *, rank: int, calibration: str | None, ties: str | None, w_llm: float,
              priors: Mapping[str, float] | None, order: bool, init: Any, rng: np.random.Generator, seed: int,
              win_prob: bool, program: str | None, extra: Mapping[str, Any] | None, backend: str | None,
              run: Mapping[str, Any], per_judgment: bool = False,
              shared: bool = False) -> tuple[SampleResult, dict, list, dict, dict, dict]:
    """One NUTS run of ``dial_sample.stan`` (or a user's copy): draws, data, aggregated cells, posterior group."""
    if isinstance(init, str) and init not in ("spectral", "random"):
        raise ArgumentError(f"init must be 'spectral', 'random' or a list of dicts, got {init!r}")
    start = dial_sample_start(data, rank=rank, calibration=calibration, order=order)  # mu_ref and the chains' start
    d, L, H = dial_sample_data(data, rank=rank, calibration=calibration, order=order, ties=ties, w_llm=w_llm,
                               w_human=1.0, priors=priors, log_lik=True, win_prob=bool(win_prob and calibration),
                               mu_ref=mu_reference(start[0].mu), per_judgment=per_judgment, shared=shared)
    if per_judgment:  # the aggregated cells, which label the judgments (CellTable.judgment_labels)
        L = llm_cell_table(data, ties=ties is not None)
        H = human_cell_table(data, ties=ties is not None) if H is not None else None
    cells = [L] + ([H] if H is not None and len(H) else [])
    chains = int(run["chains"])
    if isinstance(init, str):
        inits = dial_sample_inits(data, d, chains=chains, rng=rng, start=start) if init == "spectral" else None
    else:
        inits = list(init)
    d = with_extra(d, extra)
    cm = compile_model(program or "dial_sample", backend=backend)
    res = _draw(cm, d, seed=seed, inits=inits, run=run)
    items, judges = list(data.items), list(data.judges)
    tie_names = (judges + ([data.human_judge] if int(d["H"]) else [])) if ties else []
    post, dims, coords = _dial_posterior(res, d, items, judges, calibration, order, tie_names)
    _covariate_posterior(res.draws, d, judges + [data.human_judge], list(data.covariates), post, dims, coords)
    return res, d, cells, post, dims, coords


def _covariate_posterior(draws: Mapping[str, np.ndarray], d: Mapping[str, Any], groups: list[str],
                         covariates: list[str], post: dict, dims: dict, coords: dict) -> None:
    """Add the covariate effects ``beta`` (``beta_judge`` x ``covariate``) to a posterior group (nothing when ``n_cov = 0``).

    Row ``r`` of the program's ``beta`` is labelled by the group (``groups``: judges, then the
    people) whose ``beta_row`` is ``r``, or :data:`~pydial.estimation.steps.SHARED_JUDGES` when
    several LLM judges share it.
    """
    from pydial.estimation.steps import SHARED_JUDGES

    P = int(d["n_cov"])
    if not P:
        return
    rows = np.asarray(d["beta_row"], np.int64)
    labels = []
    for r in range(1, int(rows.max()) + 1):
        members = [groups[g] for g in np.flatnonzero(rows == r)]
        labels.append(members[0] if len(members) == 1 else SHARED_JUDGES)
    beta = np.asarray(draws["beta"], float)
    post["beta"] = beta.reshape(*beta.shape[:2], len(labels), P)
    dims["beta"] = ["beta_judge", "covariate"]
    coords["beta_judge"], coords["covariate"] = labels, covariates


def _cut_stage(data: Comparisons, res: SampleResult, d1: Mapping[str, Any], L: CellTable, post: dict, dims: dict,
               coords: dict, *,
               rank: int, calibration: str, ties: str | None, priors: Mapping[str, float] | None, seed: int,
               backend: str | None, run: Mapping[str, Any], win_prob: bool, per_judgment: bool = False) -> tuple:
    """Second stage of the cut posterior: ``c | M_t`` for every first-stage draw ``t`` (dial_calibrate.stan).

    The target is a product of independent ``d``-dimensional log-concave
    posteriors (``d``-dimensional logistic regressions with a normal prior), one
    per draw; one NUTS chain, started at the conditional modes, is run for
    ``warmup`` iterations (at most :data:`CUT_WARMUP_MAX`) and its final state
    gives one ``c_t`` per draw ``t``.
    """
    chains, draws = res.chains, res.draws_per_chain
    T = chains * draws
    N = data.N
    mu = np.asarray(res.draws["mu"]).reshape(T, N)
    if calibration == "W" and rank > 0:
        V = np.asarray(res.draws["V"]).reshape(T, N, rank)
        M = np.concatenate([mu[:, :, None], V], axis=2)
    else:
        M = mu[:, :, None]
    dim_c = M.shape[2]
    tie = ties is not None
    H_cells = human_cell_table(data, ties=tie)  # aggregated (returned); Hc is what the program reads
    Hc = H_cells.per_judgment() if per_judgment else H_cells
    if data.p:  # the covariates with an effect on the people (beta_H: the free entries of the people's row)
        Hc = dataclasses.replace(Hc, z=data.effect_columns(Hc.z, data.K))
    p = merge_priors(DIAL_SAMPLE_PRIORS, priors, "dial_sample.stan")
    d2 = dial_calibrate_data(Hc, M, ties=ties, priors=priors)
    cm = compile_model("dial_calibrate", backend=backend)
    run2 = {k: v for k, v in run.items() if k != "algorithm"}
    run2.update(chains=1, draws=1, warmup=min(int(run["warmup"]), CUT_WARMUP_MAX))
    init2 = None
    if not tie:  # start every c_t at its conditional mode: the chain starts in the bulk of the product
        modes = _calibration_modes(M, Hc, float(p["c_sd"]))
        init2 = [{"c": modes[:, :dim_c], "log_nu": np.zeros(0)} | ({"beta": modes[:, dim_c:]} if modes.shape[1] > dim_c else {})]
    res2 = cm.sample(d2, seed=seed + 1, inits=init2, **run2)
    problems = []
    nd = int(np.sum(res2.stats.get("divergent__", 0)))
    if nd:
        problems.append(f"calibration stage (dial_calibrate.stan): {nd} divergent transition(s) at the kept draw")
    c = np.asarray(res2.draws["c"]).reshape(T, dim_c)
    s_h = np.asarray(res2.draws["s_H"]).reshape(T, N)
    post["s_H"] = s_h.reshape(chains, draws, N)
    dims["s_H"] = ["item"]
    post["c"] = c.reshape(chains, draws, dim_c)
    dims["c"] = ["basis"]
    coords["basis"] = ["mu"] + ([f"V{t + 1}" for t in range(dim_c - 1)])
    if win_prob:  # the family's P(i wins), as win_prob of dial_sample.stan
        diff = s_h[:, :, None] - s_h[:, None, :]
        log_nu_h = np.log(np.asarray(res2.draws["nu"], float)).reshape(T, 1, 1) if tie else np.zeros((T, 1, 1))
        p_win = family_of(ties).probabilities(diff.reshape(-1), np.broadcast_to(log_nu_h, diff.shape).reshape(-1))[:, 0]
        post["win_prob"] = p_win.reshape(chains, draws, N, N)
        dims["win_prob"] = ["item", "item_j"]
        coords["item_j"] = list(data.items)
    if tie:
        nu_h = np.asarray(res2.draws["nu"]).reshape(chains, draws, 1)
        post["nu"] = np.concatenate([post["nu"], nu_h], axis=2)
        coords["tie_judge"] = list(coords["tie_judge"]) + [data.human_judge]
    if data.p:  # the people's covariate effects, one per first-stage draw, as the last row of beta (0 where fixed)
        beta_h = np.zeros((chains, draws, 1, data.p))
        if human_effects(data).size:
            beta_h[..., human_effects(data)] = np.asarray(res2.draws["beta"], float).reshape(chains, draws, 1, -1)
        post["beta"] = np.concatenate([post["beta"], beta_h], axis=2)
        coords["beta_judge"] = list(coords["beta_judge"]) + [data.human_judge]
        res.draws["beta"] = post["beta"]
    H = len(Hc)
    ll2 = np.asarray(res2.draws["log_lik"]).reshape(chains, draws, H)
    rep2 = np.asarray(res2.draws["counts_rep"]).reshape(chains, draws, H, 3)
    C = int(d1["C"])
    res.draws["log_lik"] = np.concatenate([np.asarray(res.draws["log_lik"]).reshape(chains, draws, C), ll2], axis=2)
    res.draws["counts_rep"] = np.concatenate(
        [np.asarray(res.draws["counts_rep"]).reshape(chains, draws, C, 3), rep2], axis=2)
    res.draws["s_H"] = post["s_H"]
    if tie:
        res.draws["nu"] = post["nu"]
    return res, [L, H_cells], post, dims, coords, problems


def _dial_posterior(res: SampleResult, d: Mapping[str, Any], items: list[str], judges: list[str],
                    calibration: str | None, order: bool, tie_names: list[str]) -> tuple[dict, dict, dict]:
    r = int(d["rank"])
    D = res.draws
    post: dict[str, np.ndarray] = {
        "S": D["S"],
        "mu": D["mu"],
        "gamma": D["gamma"],
        "consensus_scale": D["consensus_scale"],
        "consensus_strength": D["consensus_strength"],
    }
    dims: dict[str, list[str]] = {"S": ["judge", "item"], "mu": ["item"], "gamma": ["judge"]}
    coords: dict[str, Any] = {"item": items, "judge": judges}
    if r > 0:
        post["U"], post["V"] = D["U"], D["V"]
        dims["U"], dims["V"] = ["judge", "rank"], ["item", "rank"]
        coords["rank"] = [f"V{t + 1}" for t in range(r)]
    if order:
        post["b"] = D["b"]
        dims["b"] = ["judge"]
    if calibration is not None:
        post["s_H"] = D["s_H"]
        dims["s_H"] = ["item"]
        post["c"] = D["c"]
        dims["c"] = ["basis"]
        coords["basis"] = ["mu"] + ([f"V{t + 1}" for t in range(r)] if calibration == "W" else [])
        if int(d["calc_win_prob"]):
            post["win_prob"] = D["win_prob"]
            dims["win_prob"] = ["item", "item_j"]
            coords["item_j"] = items
    if tie_names:
        post["nu"] = D["nu"]
        dims["nu"] = ["tie_judge"]
        coords["tie_judge"] = tie_names
    return post, dims, coords
