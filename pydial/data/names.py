r"""Judge and item names as text: conversion, cleaning, and near-duplicate spellings (see the data guide).

Applied by every reader and to names given as arguments: a string is used as written; UTF-8 bytes are decoded;
a number goes through :func:`str`; missing stays missing; any other cell is refused (:func:`refusal`).  With
``strip_names=True`` names are put in NFC and stripped of surrounding whitespace and invisible characters (Unicode
category ``Cf`` and the blank fillers U+034F, U+115F, U+1160, U+3164, U+FFA0); a name of nothing else is blank.
Two names differing only by case, normal form, whitespace or invisible characters, or two numbers of equal value
and different types (``4``, ``4.0``), are refused as one name's spellings unless ``allow_similar_names=True``.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from numbers import Number
from typing import Any, Iterable, Mapping, SupportsFloat, cast

import numpy as np
import pandas as pd

from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError

CONTAINER_CELLS = (list, dict, set, frozenset, tuple, np.ndarray)
"""Cell types that are refused in every column: a cell holds one value."""

FILLERS = frozenset("\u034f\u115f\u1160\u3164\uffa0")
"""Invisible characters outside Unicode category ``Cf`` (a combining grapheme joiner and Hangul fillers)."""

CHANGES = ("whitespace", "invisible", "unicode")
"""Kinds of change :func:`clean` makes, in the order of :class:`NameReport`."""


def invisible(ch: str) -> bool:
    """Whether the character ``ch`` is invisible (a format character or a blank filler, see the module docstring)."""
    return ch in FILLERS or unicodedata.category(ch) == "Cf"


def _bounds(text: str) -> tuple[int, int]:
    """Start and end of ``text`` without its surrounding whitespace and invisible characters."""
    lo, hi = 0, len(text)
    while lo < hi and (text[lo].isspace() or invisible(text[lo])):
        lo += 1
    while hi > lo and (text[hi - 1].isspace() or invisible(text[hi - 1])):
        hi -= 1
    return lo, hi


def clean(text: str, strip: bool = True) -> tuple[str, tuple[str, ...]]:
    """Return a name as used and the kinds of change made (:data:`CHANGES`): with ``strip``, NFC and surroundings removed."""
    if not strip:
        return text, ()
    if text.isascii():  # the common case: no other normal form, no invisible character
        new = text.strip()
        return new, (("whitespace",) if new != text else ())
    nfc = unicodedata.normalize("NFC", text)
    lo, hi = _bounds(nfc)
    removed = nfc[:lo] + nfc[hi:]
    changes = {"whitespace": any(c.isspace() for c in removed), "invisible": any(invisible(c) for c in removed),
               "unicode": nfc != text}
    return nfc[lo:hi], tuple(c for c in CHANGES if changes[c])


def blank(text: str) -> bool:
    """Whether a name holds nothing but whitespace and invisible characters."""
    lo, hi = _bounds(text)
    return lo == hi


def fold(name: str) -> str:
    """Return the comparison key of a name: NFC, invisible characters removed, stripped, case-folded."""
    if name.isascii():
        return name.strip().casefold()
    text = "".join(c for c in unicodedata.normalize("NFC", name) if not invisible(c))
    return unicodedata.normalize("NFC", text.strip().casefold())


def refusal(x: Any) -> str | None:
    """Return why the identifier cell ``x`` is refused (e.g. ``"frozenset cells"``), ``None`` if it is accepted."""
    if isinstance(x, str) or x is None or x is pd.NA or x is pd.NaT:
        return None
    if isinstance(x, (bytes, bytearray, memoryview)):
        try:
            bytes(x).decode("utf-8")
        except UnicodeDecodeError:
            return "bytes cells that are not UTF-8 text"
        return None
    if isinstance(x, (Number, np.number, np.bool_)) and not isinstance(x, CONTAINER_CELLS):
        return None
    return f"{type(x).__name__} cells"


def cell_text(x: Any) -> str | None:
    """Return the text of an accepted identifier cell (bytes decoded as UTF-8, numbers by :func:`str`, missing None)."""
    if isinstance(x, str):
        return x
    if x is None or x is pd.NA or x is pd.NaT or (isinstance(x, (float, np.floating)) and np.isnan(x)):
        return None
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x).decode("utf-8")
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        x = x.item()
    return str(x)


def _show(text: str) -> str:
    """``repr`` of a name, or ``ascii`` where that would hide a difference (invisible or combining characters)."""
    return repr(text) if text.isprintable() and unicodedata.is_normalized("NFC", text) else ascii(text)


def _numeric_key(x: Any) -> str | None:
    """Return a common key of numeric cells with equal value (``4`` and ``4.0``), else ``None``."""
    if isinstance(x, (bool, np.bool_, str, bytes)) or not isinstance(x, (Number, np.number)):
        return None
    v = float(cast(SupportsFloat, x))  # typeshed declares no __float__ on numbers.Number
    return None if np.isnan(v) else repr(v)


def argument_name(x: Any, argument: str, strip: bool = False) -> str:
    """Return the text of a name given as an argument (``human_judge``, ``items=``), cleaned when ``strip``, else raise."""
    if refusal(x) is not None:
        raise ArgumentTypeError(f"{argument} must be a name (text or a number), got {type(x).__name__} {x!r}")
    text = cell_text(x)
    if text is None:
        raise ArgumentError(f"{argument} must be a name, got the missing value {x!r}")
    return clean(text, strip)[0]


def name_list(values: Any, argument: str) -> list[Any]:
    """Return the names of an argument listing names (``items=``), each by :func:`argument_name`; a string or mapping raises."""
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, (list, tuple, set, frozenset, np.ndarray,
                                                                      pd.Index, pd.Series)):
        hint = f"; for one name pass [{values!r}]" if isinstance(values, (str, bytes)) else ""
        raise ArgumentTypeError(f"{argument} must be a list of names, got {type(values).__name__} {values!r}{hint}")
    out = list(values)
    for k, x in enumerate(out):
        argument_name(x, f"{argument}[{k}]")
    return out


def own_items(own: Any, argument: str = "self_preference") -> dict[Any, list[Any]]:
    """Return a checked ``self_preference`` mapping (judge to an item name or a list), every value a list."""
    if not isinstance(own, Mapping):
        raise ArgumentTypeError(f"{argument} must map judges to their own items (a dict), got {type(own).__name__}")
    out: dict[Any, list[Any]] = {}
    for k, v in own.items():
        argument_name(k, f"a judge of {argument}")
        single = v is not None and not isinstance(v, CONTAINER_CELLS) and refusal(v) is None and cell_text(v) is not None
        out[k] = [v] if single else name_list(v, f"{argument}[{k!r}]")
    return out


@dataclass
class NameReport:
    """Names changed by cleaning (:func:`clean`), per kind of name (``"judge"``, ``"item"``)."""

    stripped: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Per kind of name, the ``(as written, as used)`` pairs."""
    changes: dict[str, int] = field(default_factory=dict)
    """Names changed per kind of change (of :data:`CHANGES`)."""

    @property
    def n_stripped(self) -> int:
        """Number of distinct names changed by cleaning."""
        return sum(len(v) for v in self.stripped.values())

    def what(self) -> str:
        """Say what was changed, e.g. ``"surrounding whitespace stripped"``."""
        parts = {"whitespace": "surrounding whitespace", "invisible": "invisible characters"}
        stripped = " and ".join(parts[c] for c in parts if self.changes.get(c))
        nfc = "Unicode normal form NFC applied" if self.changes.get("unicode") else ""
        return "; ".join(x for x in (stripped and f"{stripped} stripped", nfc) if x) or "names cleaned"

    def text(self) -> str:
        """One line: how many names were changed (by kind of change), with examples."""
        if not self.n_stripped:
            return "none"
        parts = []
        for kind, pairs in self.stripped.items():
            if pairs:
                ex = ", ".join(f"{a!r}->{b!r}" for a, b in pairs[:3])
                parts.append(f"{len(pairs)} {kind} name(s) ({ex}{', ...' if len(pairs) > 3 else ''})")
        counts = ", ".join(f"{n} {c}" for c, n in self.changes.items() if n)
        return "; ".join(parts) + (f" [{counts}]" if counts else "")


Spelling = tuple[str, str | None]
"""A name as written: its text and, for a numeric cell, the key shared by equal values (``4`` and ``4.0``)."""


def spelling(x: Any) -> Spelling | None:
    """Return the :data:`Spelling` of one accepted identifier cell (``None`` when missing)."""
    text = cell_text(x)
    return None if text is None else (text, _numeric_key(x))


class NameSpace:
    """The judge or item names of one data set from every column and chunk, ids in order of appearance.

    Names are cleaned when ``strip``; :meth:`check` refuses two spellings of one name.
    """

    def __init__(self, kind: str, *, strip: bool) -> None:
        self.kind = kind
        self.strip = strip
        self.ids: dict[str, int] = {}
        self.texts: list[str] = []
        self.changed: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._spellings: dict[str, set[str]] = {}  # comparison key -> texts
        self._where: dict[str, str] = {}

    def _note(self, nkey: str | None, text: str, origin: str) -> None:
        self._spellings.setdefault(nkey or fold(text), set()).add(text)
        self._where.setdefault(text, origin)

    def text(self, raw: Any, argument: str = "a name") -> str:
        """Return the text of a name given outside the table, cleaned when ``strip`` (:func:`argument_name` rules)."""
        return argument_name(raw, argument, self.strip)

    def add(self, spelled: Iterable[Spelling | None], origin: str) -> tuple[np.ndarray, np.ndarray]:
        """Register distinct spellings of ``origin``; return their name ids (``-1`` missing or blank) and the blank mask."""
        ids, blanks = [], []
        for s in spelled:
            name_id, is_blank = -1, False
            if s is not None:
                raw, nkey = s
                text, changes = clean(raw, self.strip)
                if changes:
                    self.changed.setdefault(raw, (text, changes))
                is_blank = blank(text)
                if not is_blank:
                    if text not in self.ids:
                        self.ids[text] = len(self.texts)
                        self.texts.append(text)
                    self._note(nkey, text, origin)
                    name_id = self.ids[text]
            ids.append(name_id)
            blanks.append(is_blank)
        return np.asarray(ids, dtype=np.int64), np.asarray(blanks, dtype=bool)

    def check(self, allow_similar: bool, extra: Iterable[tuple[Any, str]] = ()) -> None:
        """Refuse (:class:`DataError`) two spellings of one name among those added and ``extra``, unless ``allow_similar``."""
        for raw, origin in extra:
            self._note(_numeric_key(raw), self.text(raw, origin.rstrip("=")), origin)
        if allow_similar:
            return
        clashes = sorted(sorted(spelled) for spelled in self._spellings.values() if len(spelled) > 1)
        if clashes:
            shown, kind = clashes[0], self.kind  # the first in sorted order, whatever the order of the rows
            more = f" ({len(clashes) - 1} more such group(s) of names)" if len(clashes) > 1 else ""
            raise DataError(
                f"{kind} names {', '.join(_show(t) for t in shown[:4])} (from "
                f"{', '.join(sorted({self._where[t] for t in shown}))}) differ only by letter case, whitespace, "
                f"invisible characters, Unicode normal form or numeric type; they would be separate {kind}s{more}. "
                "Fix the spelling, or pass allow_similar_names=True (--allow-similar-names) to keep them apart"
            )

    def report(self, report: NameReport) -> None:
        """Add the names changed by cleaning to ``report``."""
        pairs = sorted((raw, new) for raw, (new, _) in self.changed.items())
        report.stripped[self.kind] = report.stripped.get(self.kind, []) + pairs
        for _, changes in self.changed.values():
            for c in changes:
                report.changes[c] = report.changes.get(c, 0) + 1


__all__ = ["CONTAINER_CELLS", "CHANGES", "NameReport", "NameSpace", "Spelling", "argument_name", "blank",
           "cell_text", "clean", "fold", "invisible", "name_list", "own_items", "refusal", "spelling"]
