"""The one module that knows which arviz is installed: posteriors are built, laid out and read through it only.

arviz 1.x represents a posterior as an :class:`xarray.DataTree` (its ``from_dict`` keyed by group, ``attrs`` too),
arviz 0.x (0.17 or newer) as ``arviz.InferenceData``; both carry the same groups, coordinates and root ``attrs``
(JSON text) and survive netCDF.  :func:`convert` lays out a posterior's draws (:class:`Sampled`).
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np

from pydial.exceptions import ArgumentError

if TYPE_CHECKING:
    from pydial.data.comparisons import CellTable, Comparisons

__all__ = ["ARVIZ_MIN", "arviz", "arviz_major", "quiet_arviz", "build", "assemble", "group_names", "group_dataset",
           "posterior_attrs", "convert_to_dataset", "rhat_ess", "bfmi", "loo", "compare", "plot_ppc", "Sampled", "convert"]

ARVIZ_MIN = (0, 17)
"""Oldest supported arviz (``InferenceData`` with ``from_cmdstanpy`` and ``rc_context``)."""


def _version(text: str) -> tuple[int, int]:
    parts = (text.split("+")[0].split(".") + ["0"])[:2]
    return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)


def arviz() -> Any:
    """Return the ``arviz`` module; a :class:`~pydial.exceptions.DependencyError` when it is missing or outside 0.17-1.x."""
    from ..exceptions import DependencyError

    try:
        import arviz as az
    except ImportError as exc:  # pragma: no cover - arviz is a dependency
        raise DependencyError(f"pydial's posteriors need arviz (`pip install arviz`): {exc}") from exc
    v = _version(az.__version__)
    if v < ARVIZ_MIN or v[0] > 1:
        raise DependencyError(f"arviz {az.__version__} is installed; pydial supports arviz >= {ARVIZ_MIN[0]}.{ARVIZ_MIN[1]} "
                              "(0.x InferenceData) and 1.x (DataTree): `pip install -U arviz`")
    return az


def arviz_major() -> int:
    """Return the major version of the installed arviz (0 or 1)."""
    return _version(arviz().__version__)[0]


ARVIZ_LOGGERS = ("arviz", "arviz_base", "arviz_stats")
"""Names of arviz's loggers (0.x logs through ``arviz._log``, a logger of its own outside :mod:`logging`'s registry)."""


def _below_error(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


@contextmanager
def quiet_arviz() -> Iterator[Any]:
    """Hold back arviz's log lines below ERROR inside the block (pydial reports the sampler's problems itself); yield arviz."""
    az = arviz()
    found = [getattr(az, "_log", None), *(logging.getLogger(name) for name in ARVIZ_LOGGERS)]
    loggers = list({id(x): x for x in found if isinstance(x, logging.Logger)}.values())
    for logger in loggers:
        logger.addFilter(_below_error)
    try:
        yield az
    finally:
        for logger in loggers:
            logger.removeFilter(_below_error)


def build(groups: Mapping[str, Mapping[str, np.ndarray]], *, coords: Mapping[str, Any],
          dims: Mapping[str, Sequence[str]], attrs: Mapping[str, Any]) -> Any:
    """Return a posterior object (DataTree / InferenceData) of ``(chain, draw, *shape)`` arrays per group, with root ``attrs``.

    ``groups``: group name to its variables (observed data without chain and draw); ``coords``, ``dims``: as arviz's.
    """
    groups = {g: dict(v) for g, v in groups.items() if v}
    layout = {"coords": dict(coords), "dims": {k: list(v) for k, v in dims.items()}}
    with quiet_arviz() as az:
        out = az.from_dict(groups, **layout) if arviz_major() >= 1 else az.from_dict(**groups, **layout)
    _set_attrs(out, attrs)
    return out


def assemble(datasets: Mapping[str, Any], attrs: Mapping[str, Any]) -> Any:
    """Return a posterior object of one :class:`xarray.Dataset` per group, with root ``attrs``."""
    if arviz_major() >= 1:
        import xarray as xr

        out = xr.DataTree.from_dict(dict(datasets))
    else:
        out = arviz().InferenceData(**datasets)
    _set_attrs(out, attrs)
    return out


def _set_attrs(obj: Any, attrs: Mapping[str, Any]) -> None:
    """Set the root attributes, and the estimand record once more on the posterior group."""
    obj.attrs.update(dict(attrs))
    if "estimand" in attrs and "posterior" in group_names(obj):
        obj["posterior"].attrs["estimand"] = attrs["estimand"]


def group_names(obj: Any) -> list[str]:
    """Return the group names of a posterior object (``["posterior", "log_likelihood", ...]``)."""
    children = getattr(obj, "children", None)
    return list(children) if isinstance(children, Mapping) else list(obj.groups())  # a DataTree, or InferenceData


def group_dataset(obj: Any, name: str) -> Any:
    """Return the group ``name`` of a posterior object as an :class:`xarray.Dataset`."""
    return obj[name].to_dataset() if isinstance(getattr(obj, "children", None), Mapping) else getattr(obj, name)


def posterior_attrs(obj: Any) -> dict[str, Any]:
    """Return the root attributes of a posterior object, completed by those found only on its ``posterior`` group."""
    out: dict[str, Any] = {}
    has_groups = isinstance(getattr(obj, "children", None), Mapping) or hasattr(obj, "groups")
    if has_groups and "posterior" in group_names(obj):
        out.update(group_dataset(obj, "posterior").attrs)
    out.update(getattr(obj, "attrs", None) or {})
    return out


def convert_to_dataset(draws: Mapping[str, np.ndarray]) -> Any:
    """Convert ``(chain, draw, *shape)`` arrays to an :class:`xarray.Dataset` (``arviz.convert_to_dataset``)."""
    with quiet_arviz() as az:
        return az.convert_to_dataset(dict(draws))


def rhat_ess(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return arviz's rank-normalized split R-hat, bulk and tail ESS of ``(chain, draw, *shape)`` draws, each ``x.shape[2:]``."""
    ds = convert_to_dataset({"x": np.asarray(x, dtype=float)})
    with quiet_arviz() as az:
        return (np.asarray(az.rhat(ds, method="rank")["x"], dtype=float),
                np.asarray(az.ess(ds, method="bulk")["x"], dtype=float),
                np.asarray(az.ess(ds, method="tail")["x"], dtype=float))


def bfmi(energy: np.ndarray) -> np.ndarray:
    """Estimate the Bayesian fraction of missing information per chain from ``(chain, draw)`` energies."""
    energy = np.asarray(energy, dtype=float)
    with quiet_arviz() as az:
        if arviz_major() >= 1:
            return np.asarray(az.bfmi(convert_to_dataset({"energy": energy}))["energy"], dtype=float)
        return np.asarray(az.bfmi(energy), dtype=float)


def psislw(log_ratios: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed importance sampling of ``log_ratios`` (target over proposal, one per draw) by the installed arviz.

    Returns the smoothed, normalized log weights and the Pareto shape ``k`` of the ratios' tail (above 0.7 the
    importance-sampling estimates are unreliable: Vehtari et al., "Pareto smoothed importance sampling");
    equal ratios (an exact proposal) have no tail: equal weights and ``k = -inf``.
    """
    lw = np.asarray(log_ratios, float) - np.max(log_ratios)
    if not np.ptp(lw) > 0:
        return np.full(lw.size, -np.log(lw.size)), -np.inf
    with quiet_arviz() as az:
        if arviz_major() >= 1:  # arviz-stats takes the log-likelihood of LOO, whose ratios are its negative
            from arviz_stats.base import array_stats

            out, k = array_stats.psislw(-lw, r_eff=1)
        else:
            out, k = az.psislw(lw)
    from scipy.special import logsumexp

    out = np.asarray(out, float)
    return out - float(logsumexp(out)), float(k)


def require_log_lik(obj: Any, name: str = "the posterior", *, group: str = "log_likelihood", use: str = "LOO") -> None:
    """Raise :class:`~pydial.ArgumentError` when ``obj`` lacks a pointwise ``group`` (``options={"log_lik": None}``)."""
    if group not in group_names(obj):
        raise ArgumentError(f"{name} has no {group} group, no pointwise output (posterior(..., options={{'log_lik': "
                            f"None}}), or left out by 'auto' at its size): {use} needs it; sample again with "
                            "options={'log_lik': 'cell'}")


def loo(obj: Any) -> dict[str, float]:
    """Return PSIS-LOO of ``log_lik`` on every arviz version: ``elpd_loo, se, p_loo, n_data_points, max_pareto_k``."""
    require_log_lik(obj)
    res = arviz().loo(obj, pointwise=True)
    if hasattr(res, "elpd"):  # arviz 1.x (ELPDData attributes)
        elpd, se, p = res.elpd, res.se, res.p
    else:  # arviz 0.x (a pandas Series)
        elpd, se, p = res["elpd_loo"], res["se"], res["p_loo"]
    return {"elpd_loo": float(elpd), "se": float(se), "p_loo": float(p), "n_data_points": int(res.n_data_points),
            "max_pareto_k": float(np.max(np.asarray(res.pareto_k)))}


def compare(models: Mapping[str, Any]) -> Any:
    """Return arviz's PSIS-LOO comparison table of the named posteriors, best first (columns ``elpd_loo``, ``p_loo``, ...).

    arviz 1.x's ``elpd`` and ``p`` get arviz 0.x's names; the other columns are the installed arviz's.
    """
    for name, obj in models.items():
        require_log_lik(obj, name)
    az = arviz()
    if arviz_major() >= 1:
        return az.compare(dict(models)).rename(columns={"elpd": "elpd_loo", "p": "p_loo"})
    return az.compare(dict(models), ic="loo")


def plot_ppc(obj: Any, var: str, *, num_samples: int = 20) -> Any:
    """Plot the posterior predictive check of ``var`` (``wins_i``, ``wins_j``, ``ties``) with ``num_samples`` draws.

    arviz-plots' ``plot_ppc_dist`` (returns its ``PlotCollection``) or arviz 0.x's ``plot_ppc`` (the axes).
    """
    require_log_lik(obj, group="posterior_predictive", use="the predictive check")
    az = arviz()
    if arviz_major() >= 1:
        return az.plot_ppc_dist(obj, var_names=[var], num_samples=num_samples, backend="matplotlib")
    return az.plot_ppc(obj, data_pairs={var: var}, var_names=[var], num_pp_samples=num_samples)


# --------------------------------------------------------------------------- pydial's layout of a posterior
@dataclass
class Sampled:
    """The draws of one posterior and how to lay them out (the output of the run step of :func:`~pydial.stan.posterior`)."""

    res: Any                             # the (first) run's SampleResult (results.py reads this module)
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


_STAT_NAMES = {"lp__": "lp", "accept_stat__": "acceptance_rate", "stepsize__": "step_size", "treedepth__": "tree_depth",
               "n_leapfrog__": "n_steps", "divergent__": "diverging", "energy__": "energy"}


def _sample_stats(res: Any) -> dict[str, np.ndarray]:
    """Return the sampler statistics under arviz's names (``diverging`` bool, ``tree_depth`` and ``n_steps`` int)."""
    out = {}
    for k, v in res.stats.items():
        name = _STAT_NAMES.get(k, k.rstrip("_"))
        out[name] = v.astype(bool) if name == "diverging" else (v.astype(np.int64) if name in ("tree_depth", "n_steps") else v)
    return out


def convert(data: Comparisons, req: Any, s: Sampled, problems: list[str], *, per_judgment: bool, seed: int,
             run: dict[str, Any]) -> Any:
    """Lay the draws out as arviz data: groups, coordinates, the estimand record and the diagnostics in ``attrs``."""
    pointwise = bool(int(s.d.get("calc_log_lik", 1)))  # options log_lik=None: no pointwise groups
    unit = ("judgment" if per_judgment else "cell") if pointwise else "none"
    res, coords, obs, pp = s.res, dict(s.coords), {}, {}
    if pointwise:  # s.cells holds the aggregated tables; per judgment, label and count the judgments of each cell
        items, names = list(data.items), list(data.judges) + [data.human_judge]
        coords[unit] = [lab for c in s.cells for lab in (c.judgment_labels if per_judgment else c.labels)(items, names)]
        cells = [c.per_judgment() for c in s.cells] if per_judgment else s.cells
        columns = {"wins_i": "wins_i", "wins_j": "wins_j", "ties": "tie_counts"}  # variable: CellTable attribute
        obs = {f: np.concatenate([getattr(c, a) for c in cells]) for f, a in columns.items()}
        rep = np.asarray(res.draws["counts_rep"]).reshape(res.chains, res.draws_per_chain, len(coords[unit]), 3)
        pp = {f: rep[..., k].astype(np.int64) for k, f in enumerate(columns)}
    dial, diag = req.model == "dial", res.diagnostics
    attrs = {
        "inference_library": "pydial.stan", "program": s.program, "model": req.model, "backend": res.backend,
        "rank": int(req.rank) if dial else -1, "calibration": str(req.calibration) if dial else "none",
        "ties": str(req.spec.ties), "order": int(req.spec.order),
        "lambda_": req.lambda_ if req.lambda_ is not None else float("nan"),
        "llm_weight": float(s.d["cell_w"][0]) if len(s.d.get("cell_w", [])) else float("nan"),
        "b_source": s.estimand.b_source, "log_lik_unit": unit, "estimand": json.dumps(s.estimand.to_record()),
        "notes": json.dumps(s.notes), "priors": json.dumps(s.priors),
        "chains": run["chains"], "draws": run["draws"], "warmup": run["warmup"], "seed": seed, "algorithm": run["algorithm"],
        "frame_sd": float(s.d["frame_sd"]) if "frame_sd" in s.d else float("nan"), "metric": res.metric,
        "sampling_seconds": float(res.seconds), "sampler_problems": json.dumps(problems),
        "sampler_diagnostics": diag.reset_index().to_json(orient="records") if diag is not None else "[]",
    }
    all_dims = {**s.dims, **({k: [unit] for k in ("log_lik", "wins_i", "wins_j", "ties")} if pointwise else {})}
    if res.backend_fit is not None and s.single_run:  # CmdStan: arviz's own converter, then the same layout
        return _from_cmdstanpy(res, s.post, pp, obs, coords, all_dims, attrs)
    log_lik = {"log_lik": np.asarray(res.draws["log_lik"]).reshape(rep.shape[:-1])} if pointwise else {}
    return build({"posterior": s.post, "log_likelihood": log_lik, "posterior_predictive": pp, "observed_data": obs,
                  "sample_stats": _sample_stats(res)}, coords=coords, dims=all_dims, attrs=attrs)


def _from_cmdstanpy(res: Any, post: Mapping[str, np.ndarray], pp: Mapping[str, np.ndarray],
                    obs: Mapping[str, np.ndarray], coords: Mapping[str, Any], dims: Mapping[str, list[str]],
                    attrs: Mapping[str, Any]) -> Any:
    """Return the arviz data of a CmdStan run: ``arviz.from_cmdstanpy``'s posterior (plus derived ``s_judges``) and log_lik."""
    import xarray as xr

    fit = res.backend_fit
    from_fit = [k for k in post if k in fit.metadata.stan_vars]
    pointwise = bool(obs)
    with quiet_arviz() as az:
        idata = az.from_cmdstanpy(
            posterior=fit, log_likelihood={"log_lik": "log_lik"} if pointwise else None, coords=dict(coords),
            dims={k: v for k, v in dims.items() if k in from_fit or k == "log_lik"})
    full = group_dataset(idata, "posterior")
    ds = full[from_fit]
    for k in post:  # derived quantities (not Stan variables)
        if k not in from_fit:
            ds[k] = xr.DataArray(post[k], dims=("chain", "draw", *dims.get(k, [f"{k}_dim_{i}" for i in range(
                np.ndim(post[k]) - 2)])), coords={dm: coords[dm] for dm in dims.get(k, []) if dm in coords})
    ds = ds[list(post)]
    ds.attrs.update(full.attrs)
    groups = ("sample_stats", "posterior_predictive", "observed_data") if pointwise else ("sample_stats",)
    extra = build({"posterior_predictive": pp, "observed_data": obs, "sample_stats": _sample_stats(res)},
                  coords=coords, dims=dims, attrs={})
    return assemble({"posterior": ds, **({"log_likelihood": group_dataset(idata, "log_likelihood")} if pointwise else {}),
                     **{g: group_dataset(extra, g) for g in groups}}, {**attrs, "converter": "arviz.from_cmdstanpy"})
