"""Judge and item names as text: conversion, whitespace, and near-duplicate spellings.

Names are data, not numbers.  The rules, applied by :meth:`pydial.Comparisons.from_frame`:

* A string cell is used as written (``"007"``, ``"3.10"``, ``"NA"`` and ``"None"``
  are names like any other).  :meth:`~pydial.Comparisons.from_csv` reads every column
  as text (``dtype=str``, no missing-value markers) so that nothing is re-typed.
* A non-string cell of a DataFrame (built in Python) is converted with :func:`str`
  (``4 -> "4"``, ``4.0 -> "4.0"``).  A missing cell (``None`` / ``NaN``) stays
  missing; a list, dict, set, tuple or array cell is refused.
* Surrounding whitespace is stripped by default (``strip_names=True``); the number
  of names changed is reported.
* Two names that differ only by letter case or surrounding whitespace (``"GPT-4"``
  and ``"gpt-4"``), or two numeric cells with the same value but different types
  (``4`` and ``4.0``), are refused as ambiguous spellings of one name, unless
  ``allow_similar_names=True`` keeps them as distinct names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Number
from typing import Any, Iterable, SupportsFloat, cast

import numpy as np
import pandas as pd

from .exceptions import DataError

UNHASHABLE_CELLS = (list, dict, set, tuple, np.ndarray)
"""Cell types that are refused: a cell holds one value."""


def cell_text(x: Any) -> Any:
    """Return the text of one identifier cell.

    Strings unchanged, numbers through :func:`str`, ``None`` / ``NaN`` kept as missing (``None``).
    """
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and np.isnan(x)) or x is pd.NA or x is pd.NaT:
        return None
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        x = x.item()
    return str(x)


def _numeric_key(x: Any) -> str | None:
    """Return a common key of numeric cells with equal value (``4`` and ``4.0``), else ``None``."""
    if isinstance(x, bool) or isinstance(x, np.bool_) or isinstance(x, str) or not isinstance(x, (Number, np.number)):
        return None
    v = float(cast(SupportsFloat, x))  # typeshed declares no __float__ on numbers.Number
    return None if np.isnan(v) else repr(v)


def fold(name: str) -> str:
    """Return the comparison key of a name: stripped and case-folded."""
    return name.strip().casefold()


@dataclass
class NameReport:
    """Names changed by stripping whitespace, per kind (``"judge"``, ``"item"``)."""

    stripped: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    @property
    def n_stripped(self) -> int:
        """Number of distinct names changed by stripping."""
        return sum(len(v) for v in self.stripped.values())

    def text(self) -> str:
        """One line: how many names were changed, with examples."""
        if not self.n_stripped:
            return "none"
        parts = []
        for kind, pairs in self.stripped.items():
            if pairs:
                ex = ", ".join(f"{a!r}->{b!r}" for a, b in pairs[:3])
                parts.append(f"{len(pairs)} {kind} name(s) ({ex}{', ...' if len(pairs) > 3 else ''})")
        return "; ".join(parts)


def names_as_text(
    columns: dict[str, pd.Series],
    kind: str,
    *,
    strip: bool,
    allow_similar: bool,
    report: NameReport,
    extra: Iterable[tuple[Any, str]] = (),
) -> dict[str, pd.Series]:
    """Convert the identifier ``columns`` to text by the rules of this module.

    The columns share one namespace, e.g. ``item_a`` and ``item_b``.

    Parameters
    ----------
    columns : dict
        User column name -> values.
    kind : str
        ``"judge"`` or ``"item"`` (for messages and the report).
    strip, allow_similar : bool
        See the module docstring.
    report : NameReport
        Receives the names changed by stripping.
    extra : iterable of (value, where)
        Names given outside the table (``human_judge``, ``items=``) that join the
        similar-spelling check.

    Returns
    -------
    dict
        Column name -> object Series of ``str`` (``None`` where missing).

    Raises
    ------
    DataError
        Two spellings of one name (see the module docstring).
    """
    out: dict[str, pd.Series] = {}
    spellings: dict[str, set[str]] = {}  # key -> texts
    where: dict[str, str] = {}
    changed: dict[str, str] = {}

    def note(nkey: str | None, text: str, origin: str) -> None:
        key = nkey or fold(text)
        spellings.setdefault(key, set()).add(text)
        where.setdefault(text, origin)

    for col, s in columns.items():
        if s.dtype == object and not s.map(type).eq(str).all():
            # Python objects of mixed types: keep 4 and 4.0 apart while factorizing
            tagged = s.map(lambda x: None if cell_text(x) is None else (cell_text(x), _numeric_key(x)))
            codes, uniq = pd.factorize(tagged, use_na_sentinel=True)
            pairs = list(uniq)
        else:
            codes, uniq = pd.factorize(s, use_na_sentinel=True)
            pairs = [(cell_text(u), _numeric_key(u)) for u in uniq]
        texts: list[str | None] = []
        for text, nkey in pairs:
            if strip and text is not None:
                new = text.strip()
                if new != text:
                    changed.setdefault(text, new)
                text = new
            if text is not None:
                note(nkey, text, f"column {col!r}")
            texts.append(text)
        arr = np.asarray(texts + [None], dtype=object)
        out[col] = pd.Series(arr[np.where(codes < 0, len(texts), codes)], index=s.index, dtype=object)
    for raw, origin in extra:
        text = cell_text(raw)
        if text is None:
            continue
        note(_numeric_key(raw), text.strip() if strip else text, origin)
    if not allow_similar:
        for key, spelled in spellings.items():
            if len(spelled) > 1:
                shown = sorted(spelled)
                raise DataError(
                    f"{kind} names {', '.join(repr(t) for t in shown[:4])} (from {', '.join(sorted({where[t] for t in shown}))}) "
                    "differ only by letter case, surrounding whitespace or numeric type; they would be separate "
                    f"{kind}s. Fix the spelling, or pass allow_similar_names=True (--allow-similar-names) to keep them apart"
                )
    report.stripped[kind] = report.stripped.get(kind, []) + sorted(changed.items())
    return out
