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

from pydial.exceptions import DataError

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


Spelling = tuple[str, str | None]
"""A name as written: its text and, for a numeric cell, the key shared by equal values (``4`` and ``4.0``)."""


def spelling(x: Any) -> Spelling | None:
    """Return the :data:`Spelling` of one identifier cell (``None`` when missing)."""
    text = cell_text(x)
    return None if text is None else (text, _numeric_key(x))


class NameSpace:
    """The judge or the item names of one data set, gathered from every column and chunk.

    Each distinct text (stripped when ``strip``) gets an id in order of appearance;
    :meth:`check` then refuses two spellings of one name (see the module docstring).

    Parameters
    ----------
    kind : str
        ``"judge"`` or ``"item"`` (for messages and the report).
    strip : bool
        Strip surrounding whitespace; the names changed are kept in :attr:`changed`.
    """

    def __init__(self, kind: str, *, strip: bool) -> None:
        self.kind = kind
        self.strip = strip
        self.ids: dict[str, int] = {}
        self.texts: list[str] = []
        self.changed: dict[str, str] = {}
        self._spellings: dict[str, set[str]] = {}  # comparison key -> texts
        self._where: dict[str, str] = {}

    def _note(self, nkey: str | None, text: str, origin: str) -> None:
        self._spellings.setdefault(nkey or fold(text), set()).add(text)
        self._where.setdefault(text, origin)

    def text(self, raw: Any) -> str | None:
        """Return the text of a name given outside the table (``human_judge``, ``items=``), stripped when :attr:`strip`."""
        text = cell_text(raw)
        return text.strip() if self.strip and text is not None else text

    def add(self, spelled: Iterable[Spelling | None], origin: str) -> tuple[np.ndarray, np.ndarray]:
        """Register distinct spellings of ``origin`` (e.g. ``"column 'item_a'"``).

        Returns
        -------
        ids : int64 array
            Name id of each spelling; ``-1`` when missing or blank.
        blank : bool array
            Whether the spelling is blank (empty after stripping).
        """
        ids, blank = [], []
        for s in spelled:
            if s is None:
                ids.append(-1)
                blank.append(False)
                continue
            text, nkey = s
            if self.strip:
                new = text.strip()
                if new != text:
                    self.changed.setdefault(text, new)
                text = new
            if not text.strip():
                ids.append(-1)
                blank.append(True)
                continue
            if text not in self.ids:
                self.ids[text] = len(self.texts)
                self.texts.append(text)
            self._note(nkey, text, origin)
            ids.append(self.ids[text])
            blank.append(False)
        return np.asarray(ids, dtype=np.int64), np.asarray(blank, dtype=bool)

    def check(self, allow_similar: bool, extra: Iterable[tuple[Any, str]] = ()) -> None:
        """Refuse two spellings of one name, among the names added and ``extra`` ``(value, origin)`` pairs.

        Raises
        ------
        DataError
            Two spellings of one name, unless ``allow_similar``.
        """
        for raw, origin in extra:
            text = self.text(raw)
            if text is not None:
                self._note(_numeric_key(raw), text, origin)
        if allow_similar:
            return
        clashes = sorted(sorted(spelled) for spelled in self._spellings.values() if len(spelled) > 1)
        if clashes:
            shown, kind = clashes[0], self.kind  # the first in sorted order, whatever the order of the rows
            more = f" ({len(clashes) - 1} more such group(s) of names)" if len(clashes) > 1 else ""
            raise DataError(
                f"{kind} names {', '.join(repr(t) for t in shown[:4])} (from "
                f"{', '.join(sorted({self._where[t] for t in shown}))}) differ only by letter case, surrounding "
                f"whitespace or numeric type; they would be separate {kind}s{more}. Fix the spelling, or pass "
                "allow_similar_names=True (--allow-similar-names) to keep them apart"
            )

    def report(self, report: NameReport) -> None:
        """Add the names changed by stripping to ``report``."""
        report.stripped[self.kind] = report.stripped.get(self.kind, []) + sorted(self.changed.items())
