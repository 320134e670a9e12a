"""The InferenceData layer: the one module that knows which arviz is installed.

pydial builds and reads posteriors through these functions only, so that every
other module is written once for both arviz generations:

* **arviz 1.x** (the ArviZverse: ``arviz-base`` converters, ``arviz-stats``
  diagnostics, ``arviz-plots``) represents a posterior as an
  :class:`xarray.DataTree`; ``from_dict`` takes one dictionary keyed by group,
  and its ``attrs=`` is keyed by group too (flat attributes are dropped with a
  warning), so pydial writes its record on the tree's root after building it.
* **arviz 0.x** (0.17 or newer; the newest arviz on Python 3.11) represents it
  as ``arviz.InferenceData``, whose ``from_dict`` takes one keyword per group.

Both carry the same groups, variables, coordinates and root ``attrs`` (the
estimand record, the program, the priors and the sampler diagnostics as JSON
text), and both survive ``to_netcdf`` / ``from_netcdf`` (through ``h5netcdf``,
a dependency of pydial). :func:`posterior_attrs` reads the root attributes of
either, falling back to the ``posterior`` group, where pydial stores the
estimand record a second time.
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
    """Import arviz and check that pydial supports its version.

    Returns
    -------
    module
        The ``arviz`` module.

    Raises
    ------
    pydial.exceptions.DependencyError
        arviz is missing, or older than :data:`ARVIZ_MIN`, or of a major version
        after 1 (not yet supported).
    """
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
    """Hold back arviz's log lines below ERROR (e.g. ``Shape validation failed`` for one chain) inside the block.

    pydial converts draws and computes R-hat, ESS and E-BFMI itself and reports the problems in
    its own words (its sampler warnings), so a log line of arviz would only repeat them in
    another form.
    """
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
    """Build a posterior object from ``(chain, draw, *shape)`` arrays per group.

    Parameters
    ----------
    groups : mapping of str to mapping of str to ndarray
        Group name (``"posterior"``, ``"log_likelihood"``, ``"posterior_predictive"``,
        ``"observed_data"``, ``"sample_stats"``) to its variables; observed data have
        no chain and draw dimensions.
    coords, dims : mapping
        Coordinate values by dimension name, and dimension names by variable.
    attrs : mapping
        Root attributes (strings and numbers; pydial writes its records as JSON text).

    Returns
    -------
    xarray.DataTree or arviz.InferenceData
        A DataTree on arviz 1.x, an InferenceData on arviz 0.x.
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
    """Build a posterior object from one :class:`xarray.Dataset` per group (as :func:`build` returns it).

    Parameters
    ----------
    datasets : mapping of str to xarray.Dataset
        Group name to its dataset.
    attrs : mapping
        Root attributes.

    Returns
    -------
    xarray.DataTree or arviz.InferenceData
    """
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
    """Return the names of the groups of a posterior object (``["posterior", "log_likelihood", ...]``).

    Parameters
    ----------
    obj : xarray.DataTree or arviz.InferenceData

    Returns
    -------
    list of str
    """
    children = getattr(obj, "children", None)
    if isinstance(children, Mapping):  # DataTree
        return list(children)
    return list(obj.groups())


def group_dataset(obj: Any, name: str) -> Any:
    """Return one group of a posterior object as an :class:`xarray.Dataset`.

    Parameters
    ----------
    obj : xarray.DataTree or arviz.InferenceData
    name : str
        The group (``"posterior"``, ``"sample_stats"``, ...).

    Returns
    -------
    xarray.Dataset
    """
    if isinstance(getattr(obj, "children", None), Mapping):  # DataTree
        return obj[name].to_dataset()
    return getattr(obj, name)


def posterior_attrs(obj: Any) -> dict[str, Any]:
    """Return the root attributes of a posterior object, completed by those of its ``posterior`` group.

    Parameters
    ----------
    obj : xarray.DataTree, arviz.InferenceData or anything with ``attrs``

    Returns
    -------
    dict
        The root attributes; a key found only on the ``posterior`` group (as the
        estimand record after a round trip that kept group attributes only) is
        taken from there.
    """
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
    """Compute the rank-normalized split R-hat, bulk ESS and tail ESS of ``(chain, draw, *shape)`` draws, per scalar.

    Parameters
    ----------
    x : ndarray
        Draws of one variable.

    Returns
    -------
    rhat, ess_bulk, ess_tail : ndarray
        Each of shape ``x.shape[2:]`` (arviz's ``rhat(method="rank")`` and
        ``ess(method="bulk" | "tail")``, Vehtari et al. 2021).
    """
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
    """Compute PSIS-LOO of a posterior's ``log_lik`` (``arviz.loo``), in the same terms on every arviz version.

    Parameters
    ----------
    obj : xarray.DataTree or arviz.InferenceData
        With a ``log_likelihood`` group.

    Returns
    -------
    dict
        ``elpd_loo`` and its standard error ``se``, the effective number of
        parameters ``p_loo``, ``n_data_points`` and the largest Pareto ``k``
        (``max_pareto_k``).
    """
    res = arviz().loo(obj, pointwise=True)
    if hasattr(res, "elpd"):  # arviz 1.x (ELPDData attributes)
        elpd, se, p = res.elpd, res.se, res.p
    else:  # arviz 0.x (a pandas Series)
        elpd, se, p = res["elpd_loo"], res["se"], res["p_loo"]
    return {"elpd_loo": float(elpd), "se": float(se), "p_loo": float(p), "n_data_points": int(res.n_data_points),
            "max_pareto_k": float(np.max(np.asarray(res.pareto_k)))}


def compare(models: Mapping[str, Any]) -> Any:
    """Compare posteriors by PSIS-LOO of the same data (``arviz.compare``), best first.

    Parameters
    ----------
    models : mapping of str to xarray.DataTree or arviz.InferenceData
        Name to posterior; each with a ``log_likelihood`` group over the same units.

    Returns
    -------
    pandas.DataFrame
        arviz's comparison table, one row per model: ``rank``, ``elpd_loo``, ``p_loo``,
        ``elpd_diff``, ``dse``, ``weight`` and ``se`` (arviz 1.x's ``elpd`` and ``p`` are
        given these, arviz 0.x's, names), and the columns of the installed arviz.
    """
    az = arviz()
    if arviz_major() >= 1:
        return az.compare(dict(models)).rename(columns={"elpd": "elpd_loo", "p": "p_loo"})
    return az.compare(dict(models), ic="loo")


def plot_ppc(obj: Any, var: str, *, num_samples: int = 20) -> Any:
    """Plot the posterior predictive check of one observed variable (arviz-plots ``plot_ppc_dist`` / arviz 0.x ``plot_ppc``).

    Parameters
    ----------
    obj : xarray.DataTree or arviz.InferenceData
        With ``posterior_predictive`` and ``observed_data`` groups holding ``var``.
    var : str
        The variable (``"wins_i"``, ``"wins_j"`` or ``"ties"``).
    num_samples : int, default 20
        Number of predictive draws drawn.

    Returns
    -------
    object
        arviz 1.x: the ``PlotCollection``; arviz 0.x: the matplotlib axes.
    """
    az = arviz()
    if arviz_major() >= 1:
        return az.plot_ppc_dist(obj, var_names=[var], num_samples=num_samples, backend="matplotlib")
    return az.plot_ppc(obj, data_pairs={var: var}, var_names=[var], num_pp_samples=num_samples)
