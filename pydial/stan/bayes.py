r"""NUTS posteriors of the DIAL models as arviz data (:func:`posterior`; a DataTree on arviz 1.x, an InferenceData on 0.x).

The DIAL methods sample ``stan/dial_sample.stan`` (the cut posterior of ``dial-anc`` adds ``stan/dial_calibrate.stan``,
:mod:`pydial.stan.dial_posterior`), ``judges`` and ``human`` sample ``stan/judges.stan``, and
``options={"program": PATH}`` a user's copy of either (:mod:`pydial.stan.programs`).  :mod:`pydial.stan.idata`, the one
module that knows the arviz version, lays out the groups, coordinates and ``attrs``; ``attrs["estimand"]`` is the
:class:`~pydial.stan.dial_posterior.Estimand` record that :func:`pydial.stan.compare_intervals` checks.
"""

from __future__ import annotations

import json
import numbers
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.estimation.spec import (COVARIATE_EFFECTS, DEFAULT_METHOD, ModelSpec, check_choice, check_count, check_level,
                                    check_seed)
from pydial.model.chart import CALIBRATIONS
from pydial.model.families import FAMILIES

from ..resources import check_bytes, memory_limit, release_arrow_cache
from ..exceptions import ArgumentError, ArgumentTypeError, DataError, EstimandMismatchError
from . import idata as azio
from .backend import BACKENDS, SamplerWarning, compile_model
from .cmdstan_backend import PATHFINDER_PATHS
from .compiled import APPROXIMATIONS
from .laplace import LAPLACE_MAX_K
from .dial_posterior import Estimand, Request, RunOptions, covariate_posterior, draw, posterior_estimand, sample_dial
from .schema import (DIAL_SAMPLE_PRIORS, JUDGES_PRIORS, CellTable, check_frame_sd, data_fingerprint, human_cell_table,
                     judges_data, llm_cell_table, merge_priors, with_extra)
from .programs import add_user_variables, check_extra

__all__ = ["ALGORITHMS", "POSTERIOR_METHODS", "POSTERIOR_OPTIONS", "MODEL_KEYWORDS", "B_SOURCES", "posterior", "estimand",
           "result_estimand", "CONSENSUS_STRENGTH_MIN"]

CONSENSUS_STRENGTH_MIN = 0.1
"""Warn when the 5% posterior quantile of ``consensus_strength`` falls below this."""

ALGORITHMS: tuple[str, ...] = ("nuts", *APPROXIMATIONS)
"""Posterior algorithms of :func:`posterior`: NUTS, and CmdStan's Laplace approximation and Pathfinder."""

LOG_LIK_UNITS: tuple[str, ...] = ("cell", "judgment")
"""Units of the pointwise log-likelihood of :func:`posterior` (``options={"log_lik": ...}``)."""

POINTWISE_BYTES = 96
"""Bytes per draw and unit of the pointwise output: ``log_lik`` and ``counts_rep`` are 4 numbers of 8 bytes, held
about three times while CmdStan's output is read and converted."""

POINTWISE_AUTO_BYTES = 2e9
"""The most pointwise output ``log_lik="auto"`` (the default) writes; a larger posterior leaves it out, with a warning."""

B_SOURCES: tuple[str, ...] = ("joint", "llm-only")
"""Where a DIAL posterior's ``b`` comes from: the joint posterior, or the LLM-only one (as in the frequentist fits)."""

MODEL_KEYWORDS: dict[str, Any] = dict(rank=1, calibration="mu", ties=None, lambda_=None, covariate_effects="judge")
"""The model keywords of :func:`posterior` (the spec's, when neither ``spec`` nor ``like`` is given), with their defaults."""

POSTERIOR_OPTIONS: dict[str, Any] = dict(init="point-start", adapt_delta=0.9, max_depth=10, refresh=None, quiet=True,
                                         progress=None, win_prob=None, include_human=True, b_stage="joint",
                                         log_lik="auto", frame_sd=None, metric="auto", program=None, extra=None)
"""The rarer sampler and extension options of :func:`posterior` (``options=``), with their defaults."""


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return :data:`POSTERIOR_OPTIONS` updated by ``options``; an unknown name is an :class:`ArgumentTypeError`."""
    if options is not None and not isinstance(options, Mapping):
        raise ArgumentTypeError(f"options must be a dict of sampler options, got {type(options).__name__}")
    unknown = sorted(set(options or {}) - set(POSTERIOR_OPTIONS))
    if unknown:
        raise ArgumentTypeError(f"options: unknown option(s) {unknown}; the options are {', '.join(POSTERIOR_OPTIONS)}")
    return POSTERIOR_OPTIONS | dict(options or {})


def result_estimand(result: Any) -> Estimand:
    """Return the estimand of a frequentist :class:`~pydial.DialResult`: its spec at the selected weight and rank.

    DIAL fits take ``b`` from the LLM-only fit (``b_source = "llm-only"``), ``judges`` from each judge's (``"judge"``).
    """
    spec = result.spec.selected(float(result.lambda_), result.rank)
    m = spec.method
    b = "none" if m == "human" or not spec.order else ("judge" if m == "judges" else "llm-only")
    data = getattr(result, "data", None)
    return Estimand(spec, b, "s_judges" if m == "judges" else "s_H",
                    data_fingerprint(data) if isinstance(data, Comparisons) else None)


def _like_spec(result: Any, data: Comparisons) -> ModelSpec:
    """Return the spec whose posterior is that of the fit ``result``'s estimator (at its selected weight and rank)."""
    head = "like= takes a fit result (like=pydial.fit(data, ...)), got"
    if isinstance(result, str):
        raise ArgumentTypeError(f"{head} the string {result!r}; to name the estimator, pass method={result!r}")
    if isinstance(result, ModelSpec):
        raise ArgumentTypeError(f"{head} a ModelSpec; pass it as spec=")
    if not (isinstance(getattr(result, "spec", None), ModelSpec) and hasattr(result, "lambda_")):
        raise ArgumentTypeError(f"{head} {type(result).__name__}; to name the estimator, pass method= (one of "
                                f"{', '.join(POSTERIOR_METHODS)})")
    spec = result_estimand(result).spec
    assert spec is not None  # a fit's estimand has its spec
    if spec.method not in POSTERIOR_METHODS:
        raise EstimandMismatchError(f"no posterior counterpart of method {spec.method!r} in pydial.stan (available: "
                                    f"{', '.join(POSTERIOR_METHODS)})", {"method": (spec.method, None)})
    if spec.method.startswith("dial") and isinstance(getattr(result, "data", None), Comparisons) and \
            result.data is not data and (result.data.n_human != data.n_human or result.data.n_llm != data.n_llm):
        raise EstimandMismatchError("posterior(..., like=result): the data differ from the data of the fit (n_H "
                                    f"{data.n_human} vs {result.data.n_human}, n_LLM {data.n_llm} vs {result.data.n_llm})")
    return spec


POSTERIOR_METHODS: tuple[str, ...] = ("dial-ada", "dial-anc", "dial-nopos", "judges", "human")
"""Methods of :func:`posterior`, in :func:`pydial.fit`'s vocabulary (``pooled`` and ``atc`` have no posterior)."""


def _resolve(method: str, like: Any, spec: Any, data: Comparisons, *, rank: Any, calibration: Any, ties: Any,
             lambda_: Any, include_human: Any, b_stage: Any, covariate_effects: Any) -> Request:
    """Return what the posterior estimates, every choice checked (naming it): from ``like`` (a fit), ``spec``, or the keywords.

    A spec without a posterior (penalized, over a rank grid) is refused; a weight grid of several values has no single
    weight: the ordinary posterior is taken.
    """
    if like is not None:
        spec = _like_spec(like, data)
        include_human = include_human and spec.method != "judges"
        b_stage = "llm-only" if spec.method.startswith("dial") else b_stage
    if spec is not None:
        if not isinstance(spec, ModelSpec):
            raise ArgumentTypeError(f"spec must be a pydial.ModelSpec, got {type(spec).__name__}")
        if spec.penalty is not None:
            raise EstimandMismatchError(f"the spec is penalized ({spec.penalty}); pydial's posteriors use proper priors, "
                                        "not the Jeffreys penalty", {"penalty": (spec.penalty, None)})
        if spec.rank is not None and not isinstance(spec.rank, int):
            raise ArgumentError(f"a rank grid (rank={spec.rank!r}) has no single posterior: fit, then pass like=result")
        method, calibration = spec.method, spec.calibration
    check_choice("covariate_effects", covariate_effects, COVARIATE_EFFECTS)
    if method in ("pooled", "atc"):
        raise ArgumentError(f"method {method!r} has no posterior counterpart in pydial.stan (available: "
                            f"{', '.join(POSTERIOR_METHODS)})")
    check_choice("method", method, POSTERIOR_METHODS)
    check_choice("ties", ties, tuple(FAMILIES))
    check_choice("include_human", include_human, (True, False))
    dial = method.startswith("dial")
    if dial:
        check_choice("b_stage", b_stage, B_SOURCES)
    if spec is None and not dial:
        if lambda_ is not None:
            raise ArgumentError(f"lambda_ applies to the DIAL methods only, got lambda_={lambda_!r} with method={method!r}")
        spec = ModelSpec(method, ties=ties)
    elif spec is None:
        rank = check_count(rank, "rank", minimum=0)
        check_choice("calibration", calibration, (None,) + tuple(CALIBRATIONS))
        if method == "dial-anc":
            if lambda_ is not None and not (isinstance(lambda_, numbers.Real) and float(lambda_) == float("inf")):
                raise ArgumentError(f"method 'dial-anc' is the cut posterior (lambda_=inf), got lambda_={lambda_!r}; "
                                    "use method='dial-ada' for a finite weight")
            lambda_ = None  # a dial-anc spec's weight is inf
        if lambda_ is not None:
            if isinstance(lambda_, bool) or not isinstance(lambda_, numbers.Real):
                raise ArgumentTypeError(f"lambda_ must be a number > 0 (inf: the cut posterior), got {lambda_!r}")
            if not float(lambda_) > 0:
                raise ArgumentError(f"lambda_ must be > 0 (inf: the cut posterior), got {lambda_!r}")
            lambda_ = [float(lambda_)]
        spec = ModelSpec(method, rank=rank, calibration=calibration, ties=ties, lambda_=lambda_,
                         covariate_effects=covariate_effects)
    return Request(spec, calibration is not None, bool(include_human), b_stage if dial else "joint")


def _check_run_arguments(chains: Any, draws: Any, warmup: Any, seed: Any, algorithm: Any, backend: Any,
                         opts: Mapping[str, Any]) -> None:
    """Check the sampler's arguments and options of :func:`posterior` (each error names its argument)."""
    check_count(chains, "chains")
    check_count(draws, "draws")
    check_count(warmup, "warmup", minimum=0)
    check_seed(seed)
    check_level(opts["adapt_delta"], "adapt_delta")
    check_count(opts["max_depth"], "max_depth")
    if opts["refresh"] is not None:
        check_count(opts["refresh"], "refresh")
    init = opts["init"]
    if isinstance(init, str):
        check_choice("init", init, ("point-start", "random"))
    elif not (isinstance(init, Sequence) and all(isinstance(i, Mapping) for i in init)) or len(init) != chains:
        raise ArgumentError(f"init must be 'point-start', 'random' or a list of one dict per chain ({chains}), got {init!r}")
    check_choice("win_prob", opts["win_prob"], (None, True, False))
    check_choice("log_lik", opts["log_lik"], ("auto", None, *LOG_LIK_UNITS))
    if opts["frame_sd"] is not None:
        check_frame_sd(opts["frame_sd"], "options['frame_sd'] (or None)")
    check_choice("metric", opts["metric"], ("auto", "dense", "diag"))
    check_choice("algorithm", algorithm, ALGORITHMS)
    check_choice("backend", backend, (None,) + BACKENDS)


def posterior(data: Comparisons, method: str = DEFAULT_METHOD, *, spec: ModelSpec | None = None, like: Any = None,
              chains: int = 4, draws: int = 1000, warmup: int = 1000, seed: int | None = None, algorithm: str = "nuts",
              backend: str | None = None, priors: Mapping[str, float] | None = None,
              options: Mapping[str, Any] | None = None, **model: Any) -> Any:
    r"""Sample a DIAL model's posterior with NUTS (or approximate it) and return it as arviz data.

    Parameters
    ----------
    data : Comparisons
        Validated judgments.
    method : {"dial-ada", "dial-anc", "dial-nopos", "judges", "human"}, default "dial-ada"
        The estimator whose posterior is sampled, in :func:`pydial.fit`'s vocabulary (its default,
        :data:`pydial.estimation.spec.DEFAULT_METHOD`): ``"dial-ada"``, ``dial_sample.stan`` at the LLM weight
        ``lambda_``; ``"dial-anc"``, its cut posterior (``lambda = inf``); ``"dial-nopos"``, without order effects;
        ``"judges"``, each LLM judge's own order-effect model (``S``, and ``s_judges``, the mean judge score that
        ``pydial.fit(method="judges")`` reports) plus the people's ``s_H``; ``"human"``, the people alone.
    spec : ModelSpec, optional
        The model as a specification (``result.spec``, or built by hand; a single weight gives ``lambda_``).
        Overrides ``method`` and the model keywords.
    like : DialResult, optional
        Sample the posterior of exactly this fit's estimator (its spec at the selected weight and rank, ``dial-anc``
        as the cut posterior, its order-effect convention); overrides ``method``, the model keywords,
        ``include_human`` and ``b_stage``.  A fit without a posterior counterpart (``pooled``, ``atc``, penalized)
        raises :class:`~pydial.exceptions.EstimandMismatchError`.
    chains, draws, warmup : int
        NUTS chains, post-warmup draws per chain, warmup iterations; an approximation (``algorithm``) returns
        ``draws`` draws and has no chains or warmup.
    seed : int, optional
        Random seed of the sampler and of the initial-value jitter.
    algorithm : {"nuts", "laplace", "pathfinder"}, default "nuts"
        Stan's NUTS, or an approximation, ``draws`` draws as one chain.  ``"laplace"``: the normal approximation at
        the mode on the unconstrained scale, computed by pydial for the DIAL methods (:mod:`pydial.stan.laplace`, any
        backend), else CmdStan's ``laplace_sample`` (httpstan raises :class:`~pydial.stan.StanBackendError`).
        ``"pathfinder"`` (CmdStan): multi-path Pathfinder, refused (:class:`~pydial.ConvergenceError`) when the
        Pareto k of its importance ratios is above 0.7 (the usual case for the DIAL models).  ``sample_stats`` then
        holds the log densities, and R-hat / ESS are not computed; the cut posterior's second stage stays NUTS.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`pydial.stan.stan_backend`.
    priors : mapping, optional
        Overrides of the default priors, tabulated with what each scale means in
        :data:`pydial.stan.schema.DIAL_SAMPLE_PRIORS` (DIAL methods) and :data:`~pydial.stan.schema.JUDGES_PRIORS`
        (``"judges"``, ``"human"``); a scale of 0 is flat.  ``attrs["priors"]`` records the priors used.
    options : mapping, optional
        The rarer sampler and extension options (defaults in :data:`POSTERIOR_OPTIONS`; an unknown name is an
        :class:`~pydial.ArgumentTypeError`):

        init : "point-start", "random" or list of dict
            ``"point-start"`` (default): each chain of a DIAL method starts at its own draw from pydial's Laplace
            approximation (:func:`pydial.stan.laplace.nuts_start`), which also gives CmdStan's metric; without a
            mode, at the point fits' start :func:`pydial.estimation.glm.initial_theta`, jittered.  The other models
            as with ``"random"``, Stan's uniform(-2, 2) on the unconstrained scale.  Or one dict per chain.
        adapt_delta, max_depth : float, int
            NUTS target acceptance rate and maximum tree depth.
        refresh : int, optional
            The sampler's progress interval (iterations), shown with ``quiet=False``.
        quiet : bool, default True
            Keep the backends' output off the console (a compilation is still announced in one line).
        progress : bool, optional
            A ``tqdm`` bar instead of the backends' progress lines.  Default: when stderr is a terminal.
        win_prob : bool, optional
            Store ``win_prob[i, j]``, the probability that people prefer item ``i`` to ``j`` in one comparison (the
            family's ``P(i wins)`` at ``s_H[i] - s_H[j]`` with the people's ``nu``,
            :meth:`pydial.model.families.Family.probabilities`; a tie is not a win).  Default: when ``N <= 30``.
        include_human : bool
            ``method="judges"``: add the people (their own scores ``s_H``).
        b_stage : {"joint", "llm-only"}
            DIAL methods: where ``b`` comes from: ``"joint"`` (default), the joint posterior; ``"llm-only"``, a second
            NUTS run of the LLM-only model at weight 1, as the frequentist DIAL fits (``b_joint`` keeps the joint
            draws; do not read joint quantities of ``b`` with the other variables).  ``lambda_=inf``: ``"llm-only"``.
        log_lik : {"auto", "cell", "judgment", None}, default "auto"
            The pointwise output (``log_lik``, ``observed_data``, ``posterior_predictive``) per aggregated cell
            ``(judge, i, j, a)`` (``"cell"``) or per judgment (``"judgment"``, labels ``cell/outcome#n``; slower);
            ``None``: none.  About ``POINTWISE_BYTES`` (96) bytes per draw and unit, checked against the available
            memory first (:class:`~pydial.MemoryLimitError`).  ``"auto"``: per cell up to ``POINTWISE_AUTO_BYTES``
            (2 GB) when it fits, else left out with a :class:`~pydial.stan.SamplerWarning`.
        frame_sd : float, optional
            DIAL methods: the scale of ``dial_sample.stan``'s expansion of the judge frame ``P``, which sets NUTS's
            geometry and no model quantity.  Default: matched to the posterior (:func:`pydial.stan.laplace.frame_scale`),
            0.2 where pydial finds no mode.  ``attrs["frame_sd"]`` records it.
        metric : {"auto", "dense", "diag"}, default "auto"
            DIAL methods on CmdStan with ``init="point-start"``: NUTS's metric from the Laplace approximation,
            ``"dense"`` its covariance kept through warmup, ``"diag"`` its variances to adapt from, ``"auto"`` dense
            where it pays and is safe (:func:`~pydial.stan.dial_posterior.dense_pays`).  Otherwise Stan's diagonal
            metric adapted from the unit metric.  ``attrs["metric"]`` records the metric.
        program : str, optional
            A ``.stan`` file sampled instead of ``dial_sample.stan`` or ``judges.stan`` (README "Extending a Stan
            program"): it reads :func:`pydial.stan.standata` plus ``extra`` (checked against its ``data`` block
            first) and writes ``log_lik`` and ``counts_rep`` as the shipped programs; its variables are labelled axis
            by axis by size: ``K`` ``judge``, ``K + 1`` ``judge_human`` (judges, then ``data.human_judge``), ``N``
            ``item`` (repeated: ``item_j``; a size two share labels nothing; else ``<name>_dim_<axis>``).
        extra : mapping, optional
            More data for ``program``.
    **model
        The model as the spec's keywords, when neither ``spec`` nor ``like`` is given:

        rank : int, default 1
            Disagreement rank ``r`` (the DIAL methods).
        calibration : {"mu", "W"} or None, default "mu"
            Human calibration basis (``None``: LLM judges only).
        ties : {None, "davidson", "rao-kupper"}
            The tie outcomes (:meth:`Comparisons.tie_cells`) with a tie parameter per judge and one for the people
            (Davidson with the Davidson-Beaver order effect, or Rao-Kupper); ``None``: decisive outcomes only.
        ``lambda_`` : float, optional
            LLM weight ``lambda`` of eq. weighted-loss (the LLM log-likelihood times ``lambda n_H / n_LLM``).
            Default ``None``: weight 1, the ordinary posterior.  ``lambda_=inf`` (``method="dial-anc"``) is the *cut*
            posterior: the LLM structure from the LLM-only posterior, then ``c`` given each draw of the basis ``M``
            from the human judgments alone (``stan/dial_calibrate.stan``).  DIAL methods only.
        covariate_effects : {"judge", "shared"}, default "judge"
            With response covariates (``Comparisons.from_frame(..., covariates=)``) every program adds ``z' beta``
            to the linear predictor: each LLM judge its own effects, or one row for all (``"shared"``, DIAL methods);
            the people have their own.  ``beta`` is over ``(beta_judge, covariate)``; the scores are style-controlled.

    Returns
    -------
    xarray.DataTree or arviz.InferenceData
        By arviz version (:mod:`pydial.stan.idata`), with the groups ``posterior``, ``log_likelihood`` (``log_lik``,
        dim ``cell``), ``posterior_predictive`` (replicated ``wins_i, wins_j, ties``), ``observed_data`` and
        ``sample_stats``.  ``attrs["estimand"]`` (JSON, :func:`pydial.stan.estimand`) records what it estimates
        (:class:`~pydial.stan.dial_posterior.Estimand`: the frequentist estimator's spec at one weight, null for
        the LLM-only posterior, ``b_source``, ``scores``, ``data`` fingerprint, ``program``), which
        :func:`pydial.stan.compare_intervals` checks.  ``attrs["sampler_problems"]`` lists the problems (JSON);
        ``attrs["sampler_diagnostics"]`` has R-hat, bulk and tail ESS per monitored scalar (``s_H[gpt-4]``).

    Raises
    ------
    pydial.ArgumentTypeError
        ``data`` is not a :class:`~pydial.Comparisons` (build it with ``Comparisons.from_frame``), or ``like`` is not
        a fit result (a method's name goes to ``method=``, a spec to ``spec=``).
    pydial.ArgumentError
        A bad argument (naming it), before anything is compiled or sampled.
    pydial.DataError
        Data the method cannot use (no LLM judgments, no human comparisons).

    Warns
    -----
    SamplerWarning
        Divergences, tree-depth saturation, low E-BFMI, R-hat > 1.01 or bulk / tail ESS below 100 per chain on the
        identified quantities, and (DIAL) a posterior near ``S' 1 = 0`` (consensus strength near 0).

    Examples
    --------
    The people's Bradley-Terry posterior on simulated data (needs a Stan backend; the program is compiled on first use):

    >>> import json
    >>> import pydial
    >>> sim = pydial.simulate(N=4, K=2, rank=1, n_llm=2000, n_human=400, seed=1)
    >>> idata = pydial.posterior(sim.comparisons, "human", chains=2, draws=200, seed=1)
    >>> idata.posterior["s_H"].dims
    ('chain', 'draw', 'item')
    >>> json.loads(idata.attrs["estimand"])["spec"]["method"]
    'human'
    """
    data = require_comparisons(data)
    opts = _options(options)
    unknown = sorted(set(model) - set(MODEL_KEYWORDS))
    if unknown:
        raise ArgumentTypeError(f"posterior() got an unexpected keyword argument {unknown[0]!r} (the model keywords: "
                                f"{', '.join(MODEL_KEYWORDS)}; the sampler's rarer ones go in options=)")
    azio.arviz()  # a supported arviz, before any compile or sampling
    req = _resolve(method, like, spec, data, **(MODEL_KEYWORDS | model), include_human=opts["include_human"],
                   b_stage=opts["b_stage"])
    _check_run_arguments(chains, draws, warmup, seed, algorithm, backend, opts)
    merge_priors(DIAL_SAMPLE_PRIORS if req.model == "dial" else JUDGES_PRIORS, priors,
                 "dial_sample.stan" if req.model == "dial" else "judges.stan")
    program, extra = opts["program"], opts["extra"]
    if extra and program is None:
        raise ArgumentError("extra data are for a user's program: pass options={'program': PATH, 'extra': {...}}")
    if program is not None:
        check_extra(program, extra, req.model)
    rng = np.random.default_rng(seed)
    stan_seed = int(rng.integers(1, 2**31 - 1)) if seed is None else int(seed)
    run: dict[str, Any] = dict(chains=chains, draws=draws, warmup=warmup, algorithm=algorithm,
                               **{k: opts[k] for k in ("adapt_delta", "max_depth", "refresh", "quiet", "progress")})
    total = {"nuts": chains * draws, "pathfinder": PATHFINDER_PATHS * draws}.get(algorithm, draws)
    pointwise = _pointwise_unit(data, req, opts["log_lik"], total)
    per_judgment = pointwise == "judgment"
    opt = RunOptions(priors=priors, init=opts["init"], rng=rng, seed=stan_seed, program=program, extra=extra,
                     win_prob=data.N <= 30 if opts["win_prob"] is None else opts["win_prob"], backend=backend, run=run,
                     per_judgment=per_judgment, log_lik=pointwise is not None, frame_sd=opts["frame_sd"],
                     metric=opts["metric"])
    sampled = sample_dial(data, req, opt) if req.model == "dial" else _sample_judges(data, req, opt)
    if program is not None:
        add_user_variables(sampled, data, str(program))
    problems = _problems(sampled, req.model)
    if problems:
        warnings.warn("Stan sampler problems:\n  - " + "\n  - ".join(problems), SamplerWarning, stacklevel=2)
    return azio.convert(data, req, sampled, problems, per_judgment=per_judgment, seed=stan_seed, run=run)


def _pointwise_unit(data: Comparisons, req: Request, log_lik: str | None, total_draws: int) -> str | None:
    """Return the unit of the pointwise output (``"cell"``, ``"judgment"``) or ``None``, its memory checked first.

    The units are the cells (or judgments) of the groups the model reads: the judges' unless ``method="human"``, the
    people's with a calibration or the people's model; Pathfinder's draws of every path count (read before resampling).
    """
    if log_lik is None:
        return None
    per_judgment = log_lik == "judgment"
    llm = req.model != "human"
    human = req.model == "human" or (req.calibration is not None if req.model == "dial" else req.include_human)
    units = ((data.n_llm * llm + data.n_human * human) if per_judgment else
             len(llm_cell_table(data, req.family)) * llm + len(human_cell_table(data, req.family)) * human)
    need = float(total_draws) * units * POINTWISE_BYTES
    made_of = f"{total_draws:,} draws x {units:,} {'judgments' if per_judgment else 'cells'} x {POINTWISE_BYTES} bytes"
    if log_lik == "auto":
        release_arrow_cache()  # as check_bytes does
        available = memory_limit()
        if need <= POINTWISE_AUTO_BYTES and (available is None or need <= available):
            return "cell"
        warnings.warn(f"the pointwise log-likelihood and replicated counts would take about {need / 1e9:,.3g} GB "
                      f"({made_of}); they are left out (no log_likelihood, posterior_predictive or observed_data "
                      "group). Ask for them with options={'log_lik': 'cell'} and fewer draws, or silence this with "
                      "options={'log_lik': None}", SamplerWarning, stacklevel=3)
        return None
    check_bytes(need, f"the pointwise output of the posterior (options={{'log_lik': {log_lik!r}}})",
                "pass options={'log_lik': None} to leave it out, or fewer draws", detail=made_of)
    return log_lik


def _sample_judges(data: Comparisons, req: Request, opt: RunOptions) -> azio.Sampled:
    """Run ``judges.stan``: each LLM judge's own model and the people's (``judges``), or the people alone (``human``)."""
    model, family, order, priors, per_judgment = req.model, req.family, req.spec.order, opt.priors, opt.per_judgment
    if model == "judges" and data.n_llm == 0:
        raise DataError("method 'judges' needs LLM judgments")
    with_human = model == "human" or (req.include_human and data.n_human > 0)
    Hc = human_cell_table(data, family) if with_human else None
    if Hc is not None and len(Hc) == 0:
        raise DataError("no human comparisons")
    K = data.K if model == "judges" else 0
    Lc = llm_cell_table(data, family) if K else CellTable.empty()
    cells = [Lc] + ([Hc] if Hc is not None else [])
    if per_judgment:
        Lc = Lc.per_judgment()
        Hc = Hc.per_judgment() if Hc is not None else None
    d = with_extra(judges_data(Lc, Hc, N=data.N, K=K, order=order and K > 0, family=family, priors=priors,
                               log_lik=opt.log_lik), opt.extra)
    inits = None if isinstance(opt.init, str) else list(opt.init)  # judges.stan is log-concave per judge
    res = draw(compile_model(opt.program or "judges", backend=opt.backend), d, seed=opt.seed, inits=inits, run=opt.run)
    judges = list(data.judges)
    dims: dict[str, list[str]] = {}
    coords: dict[str, list[str]] = {"item": list(data.items)}
    if K:
        res.draws["s_judges"], coords["judge"] = res.draws["S"].mean(axis=2), judges
        dims |= {"S": ["judge", "item"], "s_judges": ["item"]} | ({"b": ["judge"]} if order else {})
    if with_human:
        dims["s_H"] = ["item"]
    if not family.is_binary:
        dims["nu"] = ["tie_judge"]
        coords["tie_judge"] = judges[:K] + ([data.human_judge] if with_human else [])
    post = {k: res.draws[k] for k in dims}
    covariate_posterior(res.draws, d, judges[:K] + [data.human_judge], list(data.covariates), post, dims, coords)
    est = posterior_estimand(req, float("nan"), data, "judge" if model == "judges" and order else "none")
    return azio.Sampled(res, d, cells, post, dims, coords, list(post), est, "judges",
                    merge_priors(JUDGES_PRIORS, priors, "judges.stan"))


def _problems(s: azio.Sampled, model: str) -> list[str]:
    """Return the sampler's problems: divergences, R-hat / ESS of the monitored variables, the consensus trap."""
    labels = {k: [s.coords[dm] for dm in s.dims[k]] for k in s.post
              if k in s.dims and all(dm in s.coords for dm in s.dims[k])}
    problems = s.res.check(monitor=s.monitor, warn=False, labels=labels) + s.problems
    if s.res.algorithm == "laplace" and {"log_p__", "log_q__"} <= set(s.res.stats):
        k = azio.psislw((s.res.stats["log_p__"] - s.res.stats["log_q__"]).ravel())[1]
        if k > LAPLACE_MAX_K:
            problems.append(f"the Laplace approximation's importance ratios (log_p__ - log_q__) have Pareto k = {k:.2f} > "
                            f"{LAPLACE_MAX_K}: the posterior is not close to normal on the unconstrained scale and the "
                            "approximation's intervals may be off; compare with algorithm='nuts'")
    if model == "dial" and "consensus_strength" in s.res.draws:
        q05 = float(np.quantile(s.res.draws["consensus_strength"], 0.05))
        if q05 < CONSENSUS_STRENGTH_MIN:
            problems.append(f"consensus strength ||S'1|| / (sqrt(K) ||S||_F) has 5% posterior quantile {q05:.3f} < "
                            f"{CONSENSUS_STRENGTH_MIN}: the posterior approaches S'1 = 0, where the judges' mean score no "
                            "longer carries the consensus direction mu; compare with the MLE (pydial.fit) and consider "
                            "tighter priors on the judges' deviations from the consensus loading (gamma_dev, "
                            f"priors={{'gamma_sd': ...}}, default {DIAL_SAMPLE_PRIORS['gamma_sd']}) and on the "
                            f"disagreement (Z_raw, priors={{'Z_sd': ...}}, default {DIAL_SAMPLE_PRIORS['Z_sd']})")
    return problems


def estimand(idata: Any) -> Estimand | None:
    """Return what a posterior from :func:`posterior` estimates (``None`` when it has no estimand record).

    Read from the root ``attrs`` of the DataTree / InferenceData, else from its ``posterior`` group
    (:func:`pydial.stan.idata.posterior_attrs`): the JSON record of :meth:`~pydial.stan.dial_posterior.Estimand.to_record`,
    whose ``spec`` is the :class:`~pydial.ModelSpec` of the estimator (``estimand(idata).spec``).
    """
    raw = azio.posterior_attrs(idata).get("estimand")
    return None if raw is None else Estimand.from_record(json.loads(raw))
