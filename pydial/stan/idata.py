"""The one module that knows which arviz is installed: posteriors are built and read through it only.

arviz 1.x represents a posterior as an :class:`xarray.DataTree` (``from_dict`` keyed by group, its
``attrs=`` keyed by group too, so pydial writes its record on the root afterwards); arviz 0.x (0.17
or newer, the newest on Python 3.11) as ``arviz.InferenceData``.  Both carry the same groups,
variables, coordinates and root ``attrs`` (JSON text) and survive ``to_netcdf`` / ``from_netcdf``;
:func:`posterior_attrs` falls back to the ``posterior`` group, which holds the estimand record too.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

__all__ = [
    "ARVIZ_MIN",
    "arviz",
    "arviz_major",
    "quiet_arviz",
    "build",
    "assemble",
    "group_names",
    "group_dataset",
    "posterior_attrs",
    "convert_to_dataset",
    "rhat_ess",
    "bfmi",
    "loo",
    "compare",
    "plot_ppc",
]

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
        raise DependencyError(
            f"arviz {az.__version__} is installed; pydial supports arviz >= {ARVIZ_MIN[0]}.{ARVIZ_MIN[1]} "
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
def quiet_arviz() -> Iterator[None]:
    """Hold back arviz's log lines below ERROR inside the block (pydial reports the sampler's problems itself)."""
    az = arviz()
    found = [getattr(az, "_log", None), *(logging.getLogger(name) for name in ARVIZ_LOGGERS)]
    loggers = list({id(x): x for x in found if isinstance(x, logging.Logger)}.values())
    for logger in loggers:
        logger.addFilter(_below_error)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_below_error)


def build(groups: Mapping[str, Mapping[str, np.ndarray]], *, coords: Mapping[str, Any],
          dims: Mapping[str, Sequence[str]], attrs: Mapping[str, Any]) -> Any:
    """Return a posterior object (DataTree / InferenceData) of ``(chain, draw, *shape)`` arrays per group, with root ``attrs``.

    ``groups``: group name to its variables (observed data without chain and draw); ``coords``, ``dims``: as arviz's.
    """
    az = arviz()
    groups = {g: dict(v) for g, v in groups.items() if v}
    with quiet_arviz():
        if arviz_major() >= 1:
            out = az.from_dict(groups, coords=dict(coords), dims={k: list(v) for k, v in dims.items()})
        else:
            out = az.from_dict(**groups, coords=dict(coords), dims={k: list(v) for k, v in dims.items()})
    _set_attrs(out, attrs)
    return out


def assemble(datasets: Mapping[str, Any], attrs: Mapping[str, Any]) -> Any:
    """Return a posterior object of one :class:`xarray.Dataset` per group, with root ``attrs``."""
    az = arviz()
    if arviz_major() >= 1:
        import xarray as xr

        out = xr.DataTree.from_dict(dict(datasets))
    else:
        out = az.InferenceData(**datasets)
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
    if isinstance(children, Mapping):  # DataTree
        return list(children)
    return list(obj.groups())


def group_dataset(obj: Any, name: str) -> Any:
    """Return the group ``name`` of a posterior object as an :class:`xarray.Dataset`."""
    if isinstance(getattr(obj, "children", None), Mapping):  # DataTree
        return obj[name].to_dataset()
    return getattr(obj, name)


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
    with quiet_arviz():
        return arviz().convert_to_dataset(dict(draws))


def rhat_ess(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return arviz's rank-normalized split R-hat, bulk and tail ESS of ``(chain, draw, *shape)`` draws, each ``x.shape[2:]``."""
    az = arviz()
    ds = convert_to_dataset({"x": np.asarray(x, dtype=float)})
    with quiet_arviz():
        return (np.asarray(az.rhat(ds, method="rank")["x"], dtype=float),
                np.asarray(az.ess(ds, method="bulk")["x"], dtype=float),
                np.asarray(az.ess(ds, method="tail")["x"], dtype=float))


def bfmi(energy: np.ndarray) -> np.ndarray:
    """Estimate the Bayesian fraction of missing information per chain from ``(chain, draw)`` energies."""
    az = arviz()
    energy = np.asarray(energy, dtype=float)
    with quiet_arviz():
        if arviz_major() >= 1:
            return np.asarray(az.bfmi(convert_to_dataset({"energy": energy}))["energy"], dtype=float)
        return np.asarray(az.bfmi(energy), dtype=float)


def loo(obj: Any) -> dict[str, float]:
    """Return PSIS-LOO of ``log_lik`` on every arviz version: ``elpd_loo, se, p_loo, n_data_points, max_pareto_k``."""
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
    az = arviz()
    if arviz_major() >= 1:
        return az.compare(dict(models)).rename(columns={"elpd": "elpd_loo", "p": "p_loo"})
    return az.compare(dict(models), ic="loo")


def plot_ppc(obj: Any, var: str, *, num_samples: int = 20) -> Any:
    """Plot the posterior predictive check of ``var`` (``wins_i``, ``wins_j``, ``ties``) with ``num_samples`` draws.

    arviz-plots' ``plot_ppc_dist`` (returns its ``PlotCollection``) or arviz 0.x's ``plot_ppc`` (the axes).
    """
    az = arviz()
    if arviz_major() >= 1:
        return az.plot_ppc_dist(obj, var_names=[var], num_samples=num_samples, backend="matplotlib")
    return az.plot_ppc(obj, data_pairs={var: var}, var_names=[var], num_pp_samples=num_samples)
