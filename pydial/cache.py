"""Results derived from an immutable data set, kept as long as it lives (keyed by the data object and a name).

An entry goes when its data set is garbage collected, or with :func:`clear`.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Hashable, TypeVar

__all__ = ["derived", "clear", "entries"]

T = TypeVar("T")

_STORE: dict[int, dict[Hashable, Any]] = {}


def derived(data: object, key: Hashable, build: Callable[[], T]) -> T:
    """Return ``build()`` for ``data``, computed on the first call for ``(data, key)``; ``key`` names every other dependency."""
    ident = id(data)
    store = _STORE.get(ident)
    if store is None:
        store = _STORE[ident] = {}
        weakref.finalize(data, _STORE.pop, ident, None)  # forget the entries with the data set
    if key not in store:
        store[key] = build()
    return store[key]


def entries(data: object) -> tuple[Hashable, ...]:
    """Return the keys of what is cached for ``data``."""
    return tuple(_STORE.get(id(data), ()))


def clear(data: object | None = None) -> None:
    """Drop what is cached for ``data`` (every data set when None)."""
    if data is None:
        _STORE.clear()
    else:
        _STORE.pop(id(data), None)
