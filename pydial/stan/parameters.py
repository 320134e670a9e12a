"""The named parameters of ``dial.stan`` and the numpy engine's chart coordinates, mapped by name.

``dial.stan`` declares ``A_free``, ``B_free`` (the free rows of ``A`` and ``B``, ``r + 1`` columns),
``c``, ``b``, ``beta_free`` and ``log_nu``; the chart ``theta`` of :class:`pydial.model.chart.Chart`
holds the same blocks row-major, then the free ``log nu``.  Stan's unconstrained vector is the
parameters column-major in declaration order (all of them unconstrained).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Mapping

import numpy as np

from pydial.exceptions import ArgumentError

from .compiled import CompiledModel
from .results import OptimizeResult

__all__ = ["DIAL_PARAMETERS", "dial_parameters", "dial_coordinates", "dial_unconstrained", "dial_from_unconstrained",
           "optimize_dial"]

DIAL_PARAMETERS: tuple[str, ...] = ("A_free", "B_free", "c", "b", "beta_free", "log_nu")
"""The parameters of ``dial.stan`` in declaration order (the order of the chart coordinates too)."""


def _shapes(d: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Return the shape of each parameter of ``dial.stan`` for its data ``d``."""
    N, K, q, H = int(d["N"]), int(d["K"]), int(d["rank"]) + 1, int(d["H"])
    fix, ties = bool(d["fix_llm"]), int(d["ties"]) > 0
    return {"A_free": (0 if fix else K - 1, q), "B_free": (0 if fix else N - 1, q),
            "c": ({0: 0, 1: 1, 2: q}[int(d["calibration"])],), "b": (K if int(d["order"]) and not fix else 0,),
            "beta_free": (int(np.size(d["beta_fixed"]) - np.sum(d["beta_fixed"])),),
            "log_nu": ((0 if fix else K) + (H > 0) if ties else 0,)}


def _split(d: Mapping[str, Any], x: np.ndarray, what: str, order: Literal["C", "F"]) -> dict[str, np.ndarray]:
    """Cut the flat vector ``x`` into the named parameters of ``dial.stan`` (``order``: numpy's "C" or Stan's "F")."""
    x = np.asarray(x, float).ravel()
    shapes = _shapes(d)
    sizes = [int(np.prod(s)) for s in shapes.values()]
    if x.size != sum(sizes):
        raise ArgumentError(f"dial.stan: {x.size} entries in {what}, but the parameters have {sum(sizes)}")
    return {n: p.reshape(s, order=order) for (n, s), p in zip(shapes.items(), np.split(x, np.cumsum(sizes)[:-1]))}


def dial_parameters(d: Mapping[str, Any], x: np.ndarray) -> dict[str, np.ndarray]:
    """Return ``dial.stan``'s named parameters at the chart coordinates ``x``.

    Parameters
    ----------
    d : mapping
        The program's data (:func:`pydial.stan.schema.dial_data`).
    x : ndarray
        The chart ``theta`` (with ``fix_llm``: the people's coordinates ``c`` and the
        free ``beta_H``), then the free ``log nu`` of the program's ``log_nu``.

    Returns
    -------
    dict of str to ndarray
        ``A_free`` and ``B_free`` as matrices (the chart's rows), the others as vectors.

    Raises
    ------
    pydial.ArgumentError
        ``x`` does not have one entry per parameter.
    """
    return _split(d, x, "the chart coordinates", "C")


def dial_coordinates(d: Mapping[str, Any], parts: Mapping[str, Any]) -> np.ndarray:
    """Return the chart coordinates of ``dial.stan``'s named parameters ``parts`` (the inverse of :func:`dial_parameters`)."""
    return np.concatenate([np.asarray(parts.get(n, np.zeros(s)), float).reshape(s).ravel() for n, s in _shapes(d).items()])


def dial_unconstrained(d: Mapping[str, Any], x: np.ndarray) -> np.ndarray:
    """Return Stan's unconstrained vector of ``dial.stan`` at the chart coordinates ``x``."""
    return np.concatenate([v.ravel(order="F") for v in dial_parameters(d, x).values()])


def dial_from_unconstrained(d: Mapping[str, Any], u: np.ndarray) -> np.ndarray:
    """Return the chart coordinates of Stan's unconstrained vector ``u``, or of a gradient in it (the map is a permutation)."""
    return dial_coordinates(d, _split(d, u, "the unconstrained vector", "F"))


def optimize_dial(model: CompiledModel, d: Mapping[str, Any], x0: np.ndarray, **kwargs: Any) -> OptimizeResult:
    """Run :meth:`CompiledModel.optimize` of ``dial.stan`` (``kwargs``) from, and with ``u`` in, the chart coordinates."""
    res = model.optimize(d, dial_unconstrained(d, x0), **kwargs)
    return dataclasses.replace(res, u=dial_from_unconstrained(d, res.u))
