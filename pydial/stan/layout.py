"""The arviz layout of a posterior (:func:`pydial.stan.posterior`): groups, coordinates and ``attrs``.

On CmdStan a single run is converted by arviz's ``from_cmdstanpy`` and completed; otherwise the
``(chain, draw, *shape)`` arrays are assembled by ``arviz.from_dict`` (:mod:`pydial.stan.idata`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from pydial.data.comparisons import Comparisons

from . import idata as azio
from .backend import SampleResult
from .schema import CellTable

__all__ = ["Sampled", "convert"]


@dataclass
class Sampled:
    """The draws of one posterior and how to lay them out (the output of the run step of :func:`~pydial.stan.posterior`)."""

    res: SampleResult
    d: Mapping[str, Any]                 # the data of the (first) program
    cells: list[CellTable]               # the aggregated cells, LLM then human
    post: dict[str, np.ndarray]          # the posterior group
    dims: dict[str, list[str]]
    coords: dict[str, list[str]]
    monitor: list[str]                   # the variables whose R-hat and ESS are checked
    estimand: Any  # the posterior's Estimand (pydial.stan.dial_posterior)
    program: str
    priors: dict[str, float]
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    single_run: bool = True              # one run of one program (CmdStan: arviz's own converter applies)


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
    """Return the sampler statistics under arviz's names (``diverging`` bool, ``tree_depth`` and ``n_steps`` int)."""
    out = {}
    for k, v in res.stats.items():
        name = _STAT_NAMES.get(k, k.rstrip("_"))
        out[name] = v.astype(bool) if name == "diverging" else (v.astype(np.int64) if name in ("tree_depth", "n_steps") else v)
    return out


def _observed(cells: Sequence[CellTable]) -> dict[str, np.ndarray]:
    columns = {"wins_i": "wins_i", "wins_j": "wins_j", "ties": "tie_counts"}  # variable: CellTable attribute
    cat = {f: np.concatenate([getattr(c, a) for c in cells]) for f, a in columns.items()}
    return cat


def convert(data: Comparisons, req: Any, s: Sampled, problems: list[str], *, per_judgment: bool, seed: int,
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
        "ties": str(req.spec.ties),
        "order": int(req.spec.order),
        "lambda_": req.lambda_ if req.lambda_ is not None else float("nan"),
        "llm_weight": float(s.d.get("cell_w", np.ones(1))[0]) if len(s.d.get("cell_w", [])) else float("nan"),
        "b_source": s.estimand.b_source,
        "log_lik_unit": unit,
        "estimand": json.dumps(s.estimand.to_record()),
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
    """Return the arviz data of a CmdStan run: posterior and ``log_lik`` by ``arviz.from_cmdstanpy``, the rest as elsewhere.

    pydial keeps the posterior variables of :func:`posterior` and adds those derived from the draws (``s_judges``).
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
    extra = azio.build({"posterior_predictive": pp, "observed_data": obs, "sample_stats": _sample_stats(res)},
                       coords=coords, dims=dims, attrs={})
    return azio.assemble({"posterior": ds, "log_likelihood": azio.group_dataset(idata, "log_likelihood"),
                          **{g: azio.group_dataset(extra, g) for g in ("sample_stats", "posterior_predictive",
                                                                        "observed_data")}},
                         {**attrs, "converter": "arviz.from_cmdstanpy"})
