"""The posterior of the structured DIAL model: ``dial_sample.stan``, then the cut posterior's or ``b``'s second run.

The cut posterior (``lambda = inf``) runs ``dial_calibrate.stan`` given each first-stage draw; ``b_stage="llm-only"``
runs the LLM-only model once more for the order effects.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.estimation.model import DialModel
from pydial.estimation.spec import ModelSpec
from pydial.estimation.steps import SHARED_JUDGES, human_effects
from pydial.model.families import Family, family_of

from ..exceptions import ArgumentError, ConvergenceWarning, DataError, DialError
from ..optim import BOX, single_threaded_blas
from .backend import CompiledModel, SampleResult, compile_model
from .idata import Sampled, psislw
from .laplace import (LogDensity, SampleProgram, frame_scale, laplace_sample, mode, normal_log_ratios,
                      nuts_start, with_frame_sd)
from .schema import (DIAL_SAMPLE_PRIORS, CellTable, data_fingerprint, dial_calibrate_data, dial_sample_data, dial_sample_inits,
                     dial_sample_start, human_cell_table, llm_cell_table, merge_priors, mu_reference, with_extra)

__all__ = ["DENSE_METRIC_MAX", "DENSE_METRIC_MAX_K", "RATIO_DRAWS", "dense_pays",
           "Estimand", "Request", "RunOptions", "sample_dial", "run_dial", "cut_stage", "draw", "covariate_posterior",
           "CUT_WARMUP_MAX", "posterior_estimand"]

CUT_WARMUP_MAX = 200
"""Most warmup iterations of the cut posterior's second stage (near-Gaussian log-concave factors; each costs all draws)."""


DENSE_METRIC_MAX = 500
"""The most parameters for which ``metric="auto"`` gives NUTS the Laplace covariance as a dense metric.

CmdStan factors a dense metric at every iteration: at 686 parameters (N = 300) that cost as much as the steps it
saved, at 226 (N = 100) it halved the time (measurements: the Stan guide).  Above it, ``"auto"`` is diagonal.
"""

DENSE_METRIC_MAX_K = 0.3
"""The largest Pareto k of the normal approximation's importance ratios at which ``metric="auto"`` keeps it as the metric.

Measured: 0.0-0.1 on the N = 100, 1M case, 0.2-0.3 on the Arena data, 0.3-1.0 on the SBC's 5-item designs (where a
dense metric on every fit had divergences in 51 of 200)."""

RATIO_DRAWS = 1000
"""Draws of the normal approximation whose importance ratios decide ``metric="auto"`` (:func:`dense_pays`)."""


def dense_pays(prog: SampleProgram, u_hat: np.ndarray, hess: np.ndarray, rng: np.random.Generator) -> bool:
    """Whether ``metric="auto"`` makes the Laplace covariance NUTS's dense metric, kept through warmup.

    Only where it is cheap (at most :data:`DENSE_METRIC_MAX` parameters) and the posterior is close to that normal
    (the Pareto k of :data:`RATIO_DRAWS` importance ratios at most :data:`DENSE_METRIC_MAX_K`): farther from normal, a
    metric that is never adapted sends NUTS into divergences.
    """
    if u_hat.size > DENSE_METRIC_MAX:
        return False
    return psislw(normal_log_ratios(prog, u_hat, hess, draws=RATIO_DRAWS, rng=rng))[1] <= DENSE_METRIC_MAX_K


@dataclass(frozen=True)
class Request:
    """A posterior to sample: its :class:`~pydial.ModelSpec` and the few choices that are not the spec's.

    ``spec``: the model, its single weight ``lambda_`` none for the ordinary posterior, ``inf`` for the cut one.  Not
    the spec's: ``calibrated=False`` (the LLM-only posterior, ``calibration=None``, which a spec cannot hold) and the
    sampling settings ``include_human`` (``judges``) and ``b_stage``.
    """

    spec: ModelSpec
    calibrated: bool = True
    include_human: bool = True
    b_stage: str = "joint"

    @property
    def model(self) -> str:
        """The program family: ``"dial"`` (``dial_sample.stan``), ``"judges"`` or ``"human"`` (``judges.stan``)."""
        return "dial" if self.spec.method.startswith("dial") else self.spec.method

    @property
    def rank(self) -> int:
        """The rank of a DIAL posterior (0 for the other models)."""
        return self.spec.rank if isinstance(self.spec.rank, int) else 0

    @property
    def calibration(self) -> str | None:
        """The calibration basis; None for the LLM-only posterior and the non-DIAL models."""
        return self.spec.calibration if self.calibrated else None

    @property
    def lambda_(self) -> float | None:
        """The posterior's weight ``lambda`` (None: the ordinary posterior, ``inf``: the cut posterior)."""
        return None if np.isnan(self.spec.weight) else self.spec.weight

    @property
    def family(self) -> Family:
        """The outcome family of ``spec.ties``."""
        return family_of(self.spec.ties)


@dataclass(frozen=True)
class Estimand:
    """What a fit or a posterior estimates: the spec of its estimator, and the facts a spec cannot hold.

    ``spec``: the :class:`~pydial.ModelSpec` at one weight and rank (:meth:`~pydial.ModelSpec.selected`; the cut
    posterior is ``dial-anc``, or ``lambda_=inf`` alone), None for the LLM-only posterior (``calibration=None``).
    ``b_source``: where the order effects come from (``"joint"``, ``"llm-only"``, ``"judge"``, ``"none"``);
    ``scores``: the posterior variable of the method's scores; ``data``: the data's fingerprint
    (:func:`~pydial.stan.schema.data_fingerprint`); ``program``: a user's program (None: a shipped one).
    """

    spec: ModelSpec | None
    b_source: str
    scores: str | None
    data: str | None = None
    program: str | None = None

    @property
    def weight(self) -> float:
        """The weight ``lambda`` of the estimator (``inf``: anchored, the cut posterior; nan: no weight)."""
        return self.spec.weight if self.spec is not None else float("nan")

    def to_record(self) -> dict[str, Any]:
        """Return the JSON-ready record (``idata.attrs["estimand"]``): ``spec`` as :meth:`ModelSpec.to_record`."""
        return {"spec": None if self.spec is None else self.spec.to_record(), "b_source": self.b_source,
                "scores": self.scores, "data": self.data, "program": self.program}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Estimand":
        """Rebuild an estimand from :meth:`to_record`'s dict."""
        spec = record.get("spec")
        return cls(None if spec is None else ModelSpec.from_record(dict(spec)), record.get("b_source", "none"),
                   record.get("scores"), record.get("data"), record.get("program"))

    def differences(self, other: "Estimand") -> dict[str, tuple[Any, Any]]:
        """Return the fields in which ``self`` (a fit) and ``other`` (a posterior) differ; empty when they match.

        Compared: the data fingerprints (when both have one), the program, the specs' :meth:`~pydial.ModelSpec.estimand`
        (another method is the one difference reported) and ``b_source``.
        """
        out: dict[str, tuple[Any, Any]] = {}
        if self.data is not None and other.data is not None and self.data != other.data:
            out["data"] = (self.data, other.data)
        if self.program != other.program:
            out["program"] = (self.program, other.program)
        if self.spec is None or other.spec is None:
            if self.spec is not other.spec:
                mine, theirs = ("the LLM-only posterior (no calibration)" if x is None else x.method
                                for x in (self.spec, other.spec))
                out["spec"] = (mine, theirs)
            return out
        a, b = self.spec.estimand(), other.spec.estimand()
        if a["method"] != b["method"]:
            out["method"] = (a["method"], b["method"])
            return out
        out.update({k: (a[k], b[k]) for k in a if not _same(a[k], b[k])})
        if self.b_source != other.b_source:
            out["b_source"] = (self.b_source, other.b_source)
        return out


def _same(a: Any, b: Any) -> bool:
    """Equal, numbers to a relative 1e-6 (nan equals nan, inf only inf), tuples element by element."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (np.isnan(a) and np.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
    return bool(a == b)


def posterior_estimand(req: "Request", weight: float, data: Comparisons, b_source: str) -> Estimand:
    """Return the estimand of the posterior of ``req`` at the effective weight ``weight`` on ``data``."""
    if req.model != "dial":
        return Estimand(req.spec, b_source, "s_H" if req.model == "human" else "s_judges", data_fingerprint(data))
    if req.calibration is None:
        return Estimand(None, b_source, None, data_fingerprint(data))
    return Estimand(req.spec.selected(weight, req.rank), b_source, "s_H", data_fingerprint(data))


@dataclass(frozen=True)
class RunOptions:
    """How one posterior is run: priors, starts, seeds, output options, a user's program and the backend's settings."""

    priors: Mapping[str, float] | None
    init: Any
    rng: np.random.Generator
    seed: int
    win_prob: bool
    program: str | None
    extra: Mapping[str, Any] | None
    backend: str | None
    run: dict[str, Any]
    per_judgment: bool
    log_lik: bool = True  # write the pointwise log_lik and counts_rep
    frame_sd: float | None = None  # dial_sample.stan's expansion scale of P (None: matched to the posterior)
    metric: str = "auto"  # CmdStan's NUTS metric from the Laplace approximation: "dense" (kept), "diag" (adapted), "auto"


def sample_dial(data: Comparisons, req: Request, opt: RunOptions) -> Sampled:
    """Run ``dial_sample.stan``, then ``dial_calibrate.stan`` (``lambda = inf``) or the LLM-only run of ``b`` (``b_stage``)."""
    if data.K < 1 or data.n_llm == 0:
        raise DataError(f"method {req.spec.method!r} needs LLM judgments")
    if req.calibration is not None and data.n_human == 0:
        raise DataError("a calibrated posterior needs decisive human comparisons; pass calibration=None")
    if req.lambda_ is None:
        w_llm, lam_eff = 1.0, (data.n_llm / data.n_human if data.n_human else float("nan"))
    else:
        lam_eff = req.lambda_
        w_llm = lam_eff * data.n_human / data.n_llm if np.isfinite(lam_eff) else 1.0
    cut = bool(np.isinf(lam_eff)) and req.calibration is not None
    if cut and opt.program is not None:
        raise ArgumentError("lambda_=inf (the cut posterior, method 'dial-anc') samples the shipped programs only")
    out = run_dial(data, req, opt, None if cut else req.calibration, w_llm)
    b_stage = "llm-only" if cut else req.b_stage
    if cut:
        cut_stage(data, req, opt, out)
    elif req.spec.order and b_stage == "llm-only":
        llm_only = dataclasses.replace(opt, seed=opt.seed + 1, win_prob=False, program=None, extra=None,
                                       per_judgment=False, log_lik=False)
        run_b = run_dial(data, req, llm_only, None, 1.0)
        out.post["b_joint"], out.dims["b_joint"] = out.post["b"], ["judge"]
        out.post["b"] = out.res.draws["b"] = run_b.post["b"]
        out.single_run = False
        out.problems += [f"LLM-only run (b): {p}" for p in run_b.res.check(
            monitor=["b"], warn=False, labels={"b": [list(data.judges)]})]
        out.notes.append("b from a separate NUTS run of the LLM-only structured model at weight 1 (the convention "
                         "of the frequentist DIAL fits); b_joint: the joint posterior's b")
    out.estimand = posterior_estimand(req, lam_eff, data, b_stage if req.spec.order else "none")
    return out


def run_dial(data: Comparisons, req: Request, opt: RunOptions, calibration: str | None, w_llm: float) -> Sampled:
    """One NUTS run of ``dial_sample.stan`` (or a user's copy): draws, data, aggregated cells, posterior group."""
    rank, family, order, init, per_judgment = req.rank, req.family, req.spec.order, opt.init, opt.per_judgment
    start = dial_sample_start(data, rank=rank, calibration=calibration, order=order)  # mu_ref and the chains' start
    d, _, H = dial_sample_data(data, rank=rank, calibration=calibration, order=order, family=family, w_llm=w_llm,
                               w_human=1.0, priors=opt.priors, log_lik=opt.log_lik, win_prob=bool(opt.win_prob and calibration),
                               mu_ref=mu_reference(start[0].mu), per_judgment=per_judgment,
                               shared=req.spec.covariate_effects == "shared")
    # the aggregated cells, which label the judgments (CellTable.judgment_labels)
    cells = [llm_cell_table(data, family)] + ([human_cell_table(data, family)] if H is not None and len(H) else [])
    chains = int(opt.run["chains"])
    if isinstance(init, str):
        inits = dial_sample_inits(data, d, chains=chains, rng=opt.rng, start=start) if init == "point-start" else None
    else:
        inits = list(init)
    numpy_laplace = opt.run.get("algorithm") == "laplace" and opt.program is None
    u_hat: np.ndarray | None = None
    if opt.frame_sd is not None:
        d = dict(d) | {"frame_sd": float(opt.frame_sd)}
    if opt.frame_sd is None or numpy_laplace:
        try:
            d, u_hat, hess = matched_mode(data, req, d, w_llm, opt, None if isinstance(init, str) else inits)
        except DialError as e:  # no mode: NUTS and CmdStan keep the default scale; pydial's Laplace has no approximation
            if numpy_laplace:
                raise
            warnings.warn(f"no posterior mode for the frame's scale ({e}); the sampler keeps the default frame_sd "
                          f"{d['frame_sd']:g} and its own start", ConvergenceWarning, stacklevel=3)
    d = with_extra(d, opt.extra)
    if numpy_laplace:
        assert u_hat is not None
        t0, draws = time.perf_counter(), int(opt.run["draws"])
        out, stats, _ = single_threaded_blas(laplace_sample)(d, SampleProgram.from_data(d).split(u_hat), draws=draws,
                                                             seed=opt.seed, hess=hess)
        res = SampleResult(draws=out, stats=stats, chains=1, draws_per_chain=draws, warmup=0, seed=opt.seed, max_depth=0,
                           backend="numpy", seconds=time.perf_counter() - t0, algorithm="laplace")
    else:
        cm = compile_model(opt.program or "dial_sample", backend=opt.backend)
        run = opt.run
        if opt.run.get("algorithm", "nuts") == "nuts" and init == "point-start" and u_hat is not None:  # frame_sd matched
            try:  # start in the posterior's bulk; CmdStan's metric from the approximation's covariance
                prog = SampleProgram.from_data(d)
                inits, cov = nuts_start(prog, u_hat, hess, chains=chains, rng=opt.rng)
                if cm.backend == "cmdstanpy" and opt.program is None:
                    dense = opt.metric == "dense" or (opt.metric == "auto" and dense_pays(prog, u_hat, hess, opt.rng))
                    run = dict(run) | {"inv_metric": cov if dense else np.diag(cov).copy()}
            except DialError as e:
                warnings.warn(f"the Laplace start failed ({e}); NUTS starts from the point fit with its own metric",
                              ConvergenceWarning, stacklevel=3)
        res = draw(cm, d, seed=opt.seed, inits=inits, run=run)
    items, judges = list(data.items), list(data.judges)  # the posterior group: the identified quantities
    dims: dict[str, list[str]] = {"S": ["judge", "item"], "mu": ["item"], "gamma": ["judge"], "consensus_scale": [],
                                  "consensus_strength": []}
    coords: dict[str, Any] = {"item": items, "judge": judges}
    if rank > 0:
        dims |= {"U": ["judge", "rank"], "V": ["item", "rank"]}
        coords["rank"] = [f"V{t + 1}" for t in range(rank)]
    if order:
        dims["b"] = ["judge"]
    if calibration is not None:
        dims |= {"s_H": ["item"], "c": ["basis"]}
        coords["basis"] = ["mu"] + ([f"V{t + 1}" for t in range(rank)] if calibration == "W" else [])
        if int(d["calc_win_prob"]):
            dims["win_prob"] = ["item", "item_j"]
            coords["item_j"] = items
    if not family.is_binary:
        dims["nu"] = ["tie_judge"]
        coords["tie_judge"] = judges + ([data.human_judge] if int(d["H"]) else [])
    post = {k: res.draws[k] for k in dims}
    dims = {k: v for k, v in dims.items() if v}
    covariate_posterior(res.draws, d, judges + [data.human_judge], list(data.covariates), post, dims, coords)
    return Sampled(res, d, cells, post, dims, coords, ["s_H", "S", "gamma", "b", "nu", "beta", "consensus_scale"], None,
                   "dial_sample", merge_priors(DIAL_SAMPLE_PRIORS, opt.priors, "dial_sample.stan"))


@single_threaded_blas
def matched_mode(data: Comparisons, req: Request, d: Mapping[str, Any], w_llm: float, opt: RunOptions,
                 inits: Sequence[Mapping[str, Any]] | None) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Return ``d`` with ``frame_sd`` matched to the posterior, the mode ``u_hat`` and the Hessian there at that scale.

    A ``frame_sd`` the caller fixed (``opt.frame_sd``) is kept.  ``u_hat`` is the mode at any scale (``P`` is uniform);
    Newton's method starts at ``inits[0]``, else at the numpy fit of the same weighted likelihood (anchored for the
    LLM-only posterior).
    """
    if inits:
        init = dict(inits[0])
    else:
        weight = w_llm * data.n_llm / data.n_human if int(d["calibration"]) > 0 else float("inf")  # calibrated
        spec = req.spec.selected(weight, req.rank) if req.spec.adaptive else req.spec
        with warnings.catch_warnings():  # a start: the fit's own warnings are not the posterior's
            warnings.simplefilter("ignore")
            fit = DialModel(data, spec).fit()
        b = fit.position_effects["b"].to_numpy() if fit.position_effects is not None else None
        init = dial_sample_inits(data, d, chains=1, rng=opt.rng, jitter=0.0,
                                 start=(fit.structure, fit.calibration_coef, b))[0]
    prog = SampleProgram.from_data(d)
    u_hat, pt, _ = mode(LogDensity(prog), prog.join(init))
    assert pt.hess is not None
    if opt.frame_sd is not None:
        return dict(d), u_hat, pt.hess
    prog, hess = with_frame_sd(prog, u_hat, pt.hess, frame_scale(prog, u_hat, pt.hess))
    return dict(d) | {"frame_sd": prog.frame_sd}, u_hat, hess


def covariate_posterior(draws: Mapping[str, np.ndarray], d: Mapping[str, Any], groups: list[str],
                         covariates: list[str], post: dict, dims: dict, coords: dict) -> None:
    """Add ``beta`` over (``beta_judge``, ``covariate``) to a posterior group (nothing when ``n_cov = 0``).

    Row ``r`` is labelled by the group (``groups``: judges, then the people) whose ``beta_row`` is ``r``, or
    :data:`~pydial.estimation.steps.SHARED_JUDGES` when several LLM judges share it.
    """
    P = int(d["n_cov"])
    if not P:
        return
    rows = np.asarray(d["beta_row"], np.int64)
    members = [np.flatnonzero(rows == r) for r in range(1, int(rows.max()) + 1)]
    labels = [groups[m[0]] if len(m) == 1 else SHARED_JUDGES for m in members]
    beta = np.asarray(draws["beta"], float)
    post["beta"] = beta.reshape(*beta.shape[:2], len(labels), P)
    dims["beta"] = ["beta_judge", "covariate"]
    coords["beta_judge"], coords["covariate"] = labels, covariates


def cut_stage(data: Comparisons, req: Request, opt: RunOptions, out: Sampled) -> None:
    """Second stage of the cut posterior: ``c | M_t`` for every first-stage draw ``t`` (``dial_calibrate.stan``), into ``out``.

    The target is a product of independent log-concave posteriors, one per draw: one NUTS chain from the
    conditional modes runs ``warmup`` iterations (at most :data:`CUT_WARMUP_MAX`); its final state gives every ``c_t``.
    """
    res, post, dims, coords = out.res, out.post, out.dims, out.coords
    out.program += "+dial_calibrate"
    chains, draws = res.chains, res.draws_per_chain
    rank, calibration, family, priors, seed, run = req.rank, str(req.calibration), req.family, opt.priors, opt.seed, opt.run
    T, N = chains * draws, data.N
    M = np.asarray(res.draws["mu"]).reshape(T, N)[:, :, None]
    if calibration == "W" and rank > 0:
        M = np.concatenate([M, np.asarray(res.draws["V"]).reshape(T, N, rank)], axis=2)
    dim_c = M.shape[2]
    tie = not family.is_binary
    out.cells.append(human_cell_table(data, family))  # aggregated; Hc is what the program reads
    Hc = out.cells[-1].per_judgment() if opt.per_judgment else out.cells[-1]
    if data.p:  # the covariates with an effect on the people (beta_H: the free entries of the people's row)
        Hc = dataclasses.replace(Hc, z=data.effect_columns(Hc.z, data.K))
    d2 = dial_calibrate_data(Hc, M, family=family, priors=priors, log_lik=opt.log_lik)
    warmup = min(int(run["warmup"]), CUT_WARMUP_MAX)
    run2 = {k: v for k, v in run.items() if k != "algorithm"} | dict(chains=1, draws=1, warmup=warmup)
    init2 = None
    if not tie:  # start every c_t at its conditional mode: the chain starts in the bulk of the product
        modes = calibration_modes(M, Hc, float(out.priors["c_sd"]))
        init2 = [{"c": modes[:, :dim_c], "log_nu": np.zeros(0)} | ({"beta": modes[:, dim_c:]} if modes.shape[1] > dim_c else {})]
    res2 = compile_model("dial_calibrate", backend=opt.backend).sample(d2, seed=seed + 1, inits=init2, **run2)
    nd = int(np.sum(res2.stats.get("divergent__", 0)))
    if nd:
        out.problems.append(f"calibration stage (dial_calibrate.stan): {nd} divergent transition(s) at the kept draw")
    s_h = np.asarray(res2.draws["s_H"]).reshape(T, N)
    post["s_H"], dims["s_H"] = s_h.reshape(chains, draws, N), ["item"]
    post["c"], dims["c"] = np.asarray(res2.draws["c"]).reshape(chains, draws, dim_c), ["basis"]
    coords["basis"] = ["mu"] + ([f"V{t + 1}" for t in range(dim_c - 1)])
    if opt.win_prob:  # the family's P(i wins), as win_prob of dial_sample.stan
        diff = s_h[:, :, None] - s_h[:, None, :]
        log_nu_h = np.log(np.asarray(res2.draws["nu"], float)).reshape(T, 1, 1) if tie else np.zeros((T, 1, 1))
        p_win = family.probabilities(diff.reshape(-1), np.broadcast_to(log_nu_h, diff.shape).reshape(-1))[:, 0]
        post["win_prob"] = p_win.reshape(chains, draws, N, N)
        dims["win_prob"] = ["item", "item_j"]
        coords["item_j"] = list(data.items)
    if tie:
        post["nu"] = np.concatenate([post["nu"], np.asarray(res2.draws["nu"]).reshape(chains, draws, 1)], axis=2)
        coords["tie_judge"] = list(coords["tie_judge"]) + [data.human_judge]
        res.draws["nu"] = post["nu"]
    if data.p:  # the people's covariate effects, one per first-stage draw, as the last row of beta (0 where fixed)
        beta_h = np.zeros((chains, draws, 1, data.p))
        if human_effects(data).size:
            beta_h[..., human_effects(data)] = np.asarray(res2.draws["beta"], float).reshape(chains, draws, 1, -1)
        post["beta"] = np.concatenate([post["beta"], beta_h], axis=2)
        coords["beta_judge"] = list(coords["beta_judge"]) + [data.human_judge]
        res.draws["beta"] = post["beta"]
    for k, shape in (("log_lik", ()), ("counts_rep", (3,))) if opt.log_lik else ():  # the LLM cells', then the people's
        res.draws[k] = np.concatenate([np.asarray(res.draws[k]).reshape(chains, draws, int(out.d["C"]), *shape),
                                       np.asarray(res2.draws[k]).reshape(chains, draws, len(Hc), *shape)], axis=2)
    res.draws["s_H"] = post["s_H"]
    out.single_run = False
    out.notes.append("cut posterior (lambda_ = inf, the counterpart of dial-anc): mu, gamma, U, V, S, b and the judges' "
                     "nu (and beta) from the LLM-only posterior; c, s_H and the people's nu (and beta) from "
                     "dial_calibrate.stan, one calibration per first-stage draw")


def calibration_modes(M: np.ndarray, Hc: CellTable, prior_sd: float) -> np.ndarray:
    """Return the posterior modes of ``c_t`` (and ``beta_t``) given each ``M_t``: a ridge GLM (the prior's precision).

    The box ``|c| <= BOX`` of the point fits keeps separated data finite.
    """
    from pydial.estimation.glm import binary_counts, glm
    from pydial.model.design import calibration_design, dense_design

    counts = binary_counts((Hc.wins_i + Hc.wins_j).astype(float), Hc.wins_i.astype(float))
    ridge = 1.0 / prior_sd**2 if prior_sd > 0 else 1e-8
    return np.array([glm(None, counts, dense_design(calibration_design(Hc.i, Hc.j, M.shape[1], M_t, Hc.z)),
                         ridge=ridge, bound=BOX).x for M_t in M])


def draw(cm: CompiledModel, d: Mapping[str, Any], *, seed: int, inits: Sequence[Mapping[str, Any]] | None,
          run: Mapping[str, Any]) -> SampleResult:
    """One posterior run: NUTS with the run's settings, or ``draws`` draws of an approximation."""
    nuts = {k: v for k, v in run.items() if k != "algorithm"}
    if run.get("algorithm", "nuts") == "nuts":
        return cm.sample(d, seed=seed, inits=inits, **nuts)
    return cm.approximate(d, algorithm=run["algorithm"], draws=int(run["draws"]), seed=seed,
                          init=inits[0] if inits else None, quiet=bool(run["quiet"]))
