"""A user's Stan program in :func:`pydial.stan.posterior` (``options={"program": ...}``): data checks, variable labels."""

from __future__ import annotations

import dataclasses

from typing import Any, Mapping, Sequence

import numpy as np

from pydial.data.comparisons import Comparisons

from ..exceptions import ArgumentError
from .programs import data_names

__all__ = ["USER_DIM_SUFFIXES", "user_axes", "user_dims", "add_user_variables", "check_extra"]


def check_extra(program: str, extra: Mapping[str, Any] | None, model: str) -> None:
    """Check that ``extra`` gives exactly the data ``program`` declares beyond the schema of ``model``'s shipped program.

    Raises :class:`~pydial.ArgumentError` naming the unknown or missing entries.
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


USER_DIM_SUFFIXES: tuple[str, ...] = ("", "_j", "_k")
"""Suffixes of a labelled dimension that occurs more than once in one variable (``item``, ``item_j``, ``item_k``)."""


def user_axes(data: Comparisons, d: Mapping[str, Any]) -> dict[int, tuple[str, list[str]]]:
    """Return size -> (dimension, labels): ``K`` judge, ``K + 1`` judge_human (+ the people), ``N`` item; not shared sizes."""
    K, N = int(d["K"]), int(d["N"])
    judges = list(data.judges)[:K]
    candidates = [(K, "judge", judges), (K + 1, "judge_human", judges + [data.human_judge]), (N, "item", list(data.items))]
    sizes = [size for size, _, _ in candidates]
    return {size: (dim, labels) for size, dim, labels in candidates if size > 0 and sizes.count(size) == 1}


def user_dims(name: str, shape: Sequence[int], axes: Mapping[int, tuple[str, list[str]]],
              coords: dict[str, Any]) -> list[str] | None:
    """Return the dimensions of a variable of ``shape`` by :func:`user_axes` (labels to ``coords``); None: none labelled.

    A repeated dimension is suffixed; an unlabelled axis is ``<name>_dim_<axis>`` (arviz's default).
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


def add_user_variables(s: Any, data: Comparisons, program: str) -> None:
    """Add a user's program's own variables (not ``log_lik``, ``counts_rep``) to the posterior, labelled by :func:`user_dims`."""
    axes = user_axes(data, s.d)
    for name, v in s.res.draws.items():
        if name in s.post or name in ("log_lik", "counts_rep"):
            continue
        s.post[name] = v
        dims = user_dims(name, np.shape(v)[2:], axes, s.coords)
        if dims is not None:
            s.dims[name] = dims
    s.program = program
    s.estimand = dataclasses.replace(s.estimand, program=str(program))
