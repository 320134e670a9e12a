r"""NUTS posteriors of the DIAL models as :class:`arviz.InferenceData`.

``model="dial"`` samples ``stan/dial_sample.stan`` (the structured model in an
identified parameterization, optional Davidson-Beaver ties);
``model="judges"`` and ``model="human"`` sample ``stan/judges.stan`` (each
judge's own order-effect BTL; the people as one more judge, or alone).

``program=PATH`` samples a user's program (a copy of a shipped one, changed)
on the same data dictionary (:func:`pydial.stan.standata`, plus ``extra``).

The returned object has the groups ``posterior`` (identified quantities only,
with dimensions named ``item``, ``judge``, ``rank``, ``basis``, ``tie_judge``),
``log_likelihood`` (``log_lik`` per cell, dimension ``cell``; one cell is one
``(judge, i, j, a)`` combination, so LOO is leave-one-cell-out),
``posterior_predictive`` (replicated counts ``wins_i, wins_j, ties`` per
cell, drawn by the program's ``paired_rng``, so ``az.plot_ppc`` works),
``observed_data`` (the outcome counts per cell) and ``sample_stats``.  Its
``attrs`` record the program, backend, priors, weights and any sampler
problems (which are also raised as :class:`~pydial.stan.SamplerWarning`).

The layout is the same on both backends: the draws of either backend come back
as ``(chain, draw, *shape)`` arrays (:class:`SampleResult`) and are assembled
here by ``arviz.from_dict``.  (arviz's ``from_cmdstanpy`` is not used: the
posterior group holds renamed and derived quantities, and the replicated
counts are split into the three outcome variables of ``observed_data``.)
Supported arviz: 0.17 to 0.x (``InferenceData``); arviz 1.x (DataTree) is
excluded in ``pyproject.toml``.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from ..data import Comparisons
from ..exceptions import DataError
from .backend import SampleResult, SamplerWarning, compile_model
from .standata import (
    DIAL_SAMPLE_PRIORS,
    JUDGES_PRIORS,
    TIE_MODEL_CODE,
    CellTable,
    _merge,
    dial_sample_data,
    dial_sample_inits,
    human_cell_table,
    judges_data,
    llm_cell_table,
    with_extra,
)

__all__ = ["POSTERIOR_MODELS", "posterior", "CONSENSUS_STRENGTH_MIN"]

POSTERIOR_MODELS: tuple[str, ...] = ("dial", "judges", "human")

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


def posterior(
    data: Comparisons,
    rank: int = 1,
    calibration: str | None = "mu",
    ties: str | None = None,
    chains: int = 4,
    draws: int = 1000,
    warmup: int = 1000,
    seed: int | None = None,
    lam: float | None = None,
    priors: Mapping[str, float] | None = None,
    backend: str | None = None,
    *,
    model: str = "dial",
    order: bool = True,
    init: str | Sequence[Mapping[str, Any]] = "spectral",
    adapt_delta: float = 0.9,
    max_depth: int = 10,
    win_prob: bool | None = None,
    include_human: bool = True,
    program: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    r"""Sample a DIAL model's posterior with NUTS and return :class:`arviz.InferenceData`.

    Parameters
    ----------
    data : Comparisons
        Validated judgments.
    rank : int, default 1
        Disagreement rank ``r`` (``model="dial"``).
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
    lam : float, optional
        LLM weight ``lambda`` of eq. weighted-loss: the LLM log-likelihood is
        multiplied by ``lambda n_H / n_LLM`` (a power posterior whose
        log-likelihood is ``-n_H Q_lambda``).  Default ``None`` = weight 1, the
        ordinary posterior (``lambda = n_LLM / n_H``).  ``model="dial"`` only.
    priors : mapping, optional
        Overrides of :data:`pydial.stan.standata.DIAL_SAMPLE_PRIORS`
        (``model="dial"``) or :data:`~pydial.stan.standata.JUDGES_PRIORS`.
        Defaults (``dial``): the mean judge score ``S'1/K = gamma_bar mu ~ N(0, 2^2)``
        in centered coordinates (so ``mu`` is uniform on its sphere and the
        consensus scale ``gamma_bar`` has a scaled chi prior vanishing at 0),
        gamma deviations ``~ N(0, 1)``, ``U ~ N(0, 1)``, ``b ~ N(0, 1)``,
        ``c ~ N(0, 2^2)``, ``log nu ~ N(-1, 1.5^2)``; ``V`` uniform (parameter
        expansion).  A scale of 0 makes that block flat.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`pydial.stan.stan_backend`.
    model : {"dial", "judges", "human"}
        ``"dial"``: ``dial_sample.stan``; ``"judges"``: each LLM judge's own
        order-effect model (``S``) plus the people's own scores ``s_H``
        (``include_human``); ``"human"``: the people alone (BTL, or a tie
        model with ``ties``).
    order : bool
        Estimate the judges' order effects.
    init : "spectral", "random" or list of dict
        ``"spectral"`` (``model="dial"``): each chain starts near the
        deterministic least-squares start of
        :func:`pydial.stan.standata.spectral_start`, jittered; ``"random"``:
        Stan's uniform(-2, 2) start; or one dict of initial values per chain.
    adapt_delta, max_depth : float, int
        NUTS target acceptance rate and maximum tree depth.
    win_prob : bool, optional
        Store the ``N x N`` human win probabilities ``sigma(s_i - s_j)``
        (default: when ``N <= 30``).
    include_human : bool
        ``model="judges"``: add the people (their own scores ``s_H``).
    program : str, optional
        Path to a ``.stan`` file to sample instead of the shipped program of
        ``model`` (``dial_sample.stan`` or ``judges.stan``): a copy with a
        change, reading the same data (the shared schema of
        :func:`pydial.stan.standata`) plus ``extra``.  Its ``#include`` lines
        find pydial's include files.  Every variable it outputs goes to the
        posterior group (dimensions named as for the shipped program where the
        names agree); it must write ``log_lik`` and ``counts_rep`` as the
        shipped programs do.
    extra : mapping, optional
        More data for ``program``.

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior``, ``log_likelihood`` (``log_lik``, dim ``cell``),
        ``posterior_predictive`` (replicated ``wins_i, wins_j, ties``, dim
        ``cell``), ``observed_data``, ``sample_stats``.  ``attrs["sampler_problems"]``
        lists the problems found (JSON list of strings).

    Warns
    -----
    SamplerWarning
        Divergences, tree-depth saturation, low E-BFMI, R-hat > 1.01 or bulk /
        tail ESS below 100 per chain on the identified quantities, and (``dial``)
        a consensus strength near 0 (DESIGN.md "Known trap").
    """
    import arviz as az

    if model not in POSTERIOR_MODELS:
        raise ValueError(f"model must be one of {POSTERIOR_MODELS}, got {model!r}")
    if ties not in TIE_MODEL_CODE:
        raise ValueError(f"ties must be one of {list(TIE_MODEL_CODE)}, got {ties!r}")
    if extra and program is None:
        raise ValueError("extra data are for a user's program: pass program=PATH")
    if win_prob is None:
        win_prob = data.N <= 30
    rng = np.random.default_rng(seed)
    stan_seed = int(rng.integers(1, 2**31 - 1)) if seed is None else int(seed)
    items = list(data.items)
    judges = list(data.judges)

    if model == "dial":
        if data.K < 1 or data.n_llm == 0:
            raise DataError("model 'dial' needs LLM judgments")
        if calibration is not None and data.n_human == 0:
            raise DataError("a calibrated posterior needs decisive human comparisons; pass calibration=None")
        if lam is None:
            w_llm = 1.0
        else:
            if not (np.isfinite(lam) and lam > 0):
                raise ValueError(f"lam must be finite and > 0, got {lam!r}")
            w_llm = float(lam) * data.n_human / data.n_llm
        d, L, H = dial_sample_data(data, rank=rank, calibration=calibration, order=order, ties=ties, w_llm=w_llm,
                                   w_human=1.0, priors=priors, log_lik=True, win_prob=bool(win_prob and calibration))
        cells = [L] + ([H] if H is not None and len(H) else [])
        if isinstance(init, str):
            if init == "spectral":
                inits = dial_sample_inits(data, d, chains=chains, rng=rng)
            elif init == "random":
                inits = None
            else:
                raise ValueError(f"init must be 'spectral', 'random' or a list of dicts, got {init!r}")
        else:
            inits = list(init)
        d = with_extra(d, extra)
        cm = compile_model(program or "dial_sample", backend=backend)
        res = cm.sample(d, chains=chains, draws=draws, warmup=warmup, seed=stan_seed, inits=inits,
                        adapt_delta=adapt_delta, max_depth=max_depth)
        tie_names = (judges + ([data.human_judge] if int(d["H"]) else [])) if ties else []
        post, dims, coords = _dial_posterior(res, d, items, judges, calibration, order, tie_names)
        monitor = ["s_H", "S", "gamma", "b", "nu", "consensus_scale"]
        used_priors = _merge(DIAL_SAMPLE_PRIORS, priors, "dial_sample.stan")
        program_name = "dial_sample"
    else:
        if lam is not None:
            raise ValueError(f"lam applies to model='dial' only, got lam={lam!r} with model={model!r}")
        tie = ties is not None
        if model == "judges" and data.n_llm == 0:
            raise DataError("model 'judges' needs LLM judgments")
        with_human = model == "human" or (include_human and data.n_human > 0)
        Hc = human_cell_table(data, ties=tie) if with_human else None
        if with_human and len(Hc) == 0:
            raise DataError("no human comparisons")
        K = data.K if model == "judges" else 0
        Lc = llm_cell_table(data, ties=tie) if K else CellTable(*(np.zeros(0, np.int64),) * 7)
        cells = [Lc] + ([Hc] if with_human else [])
        d = with_extra(judges_data(Lc, Hc, N=data.N, K=K, order=order and K > 0, ties=ties, priors=priors), extra)
        if isinstance(init, str):
            if init not in ("spectral", "random"):
                raise ValueError(f"init must be 'spectral', 'random' or a list of dicts, got {init!r}")
            inits = None  # judges.stan is log-concave per judge: Stan's default start is fine
        else:
            inits = list(init)
        cm = compile_model(program or "judges", backend=backend)
        res = cm.sample(d, chains=chains, draws=draws, warmup=warmup, seed=stan_seed, inits=inits,
                        adapt_delta=adapt_delta, max_depth=max_depth)
        post, dims, coords = {}, {}, {"item": items}
        if K:
            post["S"] = res.draws["S"]
            dims["S"] = ["judge", "item"]
            coords["judge"] = judges
            if order:
                post["b"] = res.draws["b"]
                dims["b"] = ["judge"]
        if with_human:
            post["s_H"] = res.draws["s_H"]
            dims["s_H"] = ["item"]
        if tie:
            post["nu"] = res.draws["nu"]
            dims["nu"] = ["tie_judge"]
            coords["tie_judge"] = judges[:K] + ([data.human_judge] if with_human else [])
        monitor = list(post)
        used_priors = _merge(JUDGES_PRIORS, priors, "judges.stan")
        program_name = "judges"

    if program is not None:  # a user's program: every output variable, dims where the names agree
        for name, v in res.draws.items():
            if name not in post and name not in ("log_lik", "counts_rep"):
                post[name] = v
        program_name = str(program)

    problems = res.check(monitor=monitor, warn=False)
    if model == "dial" and "consensus_strength" in res.draws:
        q05 = float(np.quantile(res.draws["consensus_strength"], 0.05))
        if q05 < CONSENSUS_STRENGTH_MIN:
            problems.append(
                f"consensus strength ||S'1|| / (sqrt(K) ||S||_F) has 5% posterior quantile {q05:.3f} < "
                f"{CONSENSUS_STRENGTH_MIN}: the posterior approaches S'1 = 0, where mu is no longer the LLM "
                "consensus (DESIGN.md 'Known trap'); compare with the MLE and consider a stronger prior on log_gamma"
            )
    if problems:
        warnings.warn("Stan sampler problems:\n  - " + "\n  - ".join(problems), SamplerWarning, stacklevel=2)

    labels = [lab for c in cells for lab in c.labels(items, judges + [data.human_judge])]
    coords["cell"] = labels
    obs = _observed(cells)
    rep = np.asarray(res.draws["counts_rep"]).reshape(res.chains, res.draws_per_chain, len(labels), 3)
    pp = {"wins_i": rep[..., 0].astype(np.int64), "wins_j": rep[..., 1].astype(np.int64),
          "ties": rep[..., 2].astype(np.int64)}
    attrs = {
        "inference_library": "pydial.stan",
        "program": program_name,
        "model": model,
        "backend": res.backend,
        "rank": int(rank) if model == "dial" else -1,
        "calibration": str(calibration) if model == "dial" else "none",
        "ties": str(ties),
        "order": int(order),
        "lam": float(lam) if lam is not None else float("nan"),
        "llm_weight": float(d.get("cell_w", np.ones(1))[0]) if len(d.get("cell_w", [])) else float("nan"),
        "priors": json.dumps(used_priors),
        "chains": chains,
        "draws": draws,
        "warmup": warmup,
        "seed": stan_seed,
        "sampling_seconds": float(res.seconds),
        "sampler_problems": json.dumps(problems),
    }
    idata = az.from_dict(
        posterior=post,
        log_likelihood={"log_lik": res.draws["log_lik"]},
        posterior_predictive=pp,
        observed_data=obs,
        sample_stats=_sample_stats(res),
        coords=coords,
        dims={**dims, "log_lik": ["cell"], "wins_i": ["cell"], "wins_j": ["cell"], "ties": ["cell"]},
        attrs=attrs,
    )
    return idata


def _dial_posterior(res: SampleResult, d: Mapping[str, Any], items: list[str], judges: list[str],
                    calibration: str | None, order: bool, tie_names: list[str]) -> tuple[dict, dict, dict]:
    r = int(d["r"])
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
