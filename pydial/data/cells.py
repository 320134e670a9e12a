"""Cell tables of pairwise judgments (built by :class:`pydial.Comparisons`): the counts the models read, and the rows.

LLM cells ``(k, i, j, a, n, y)``: ``n`` decisive judgments of judge ``k`` on the pair ``i < j`` under display order
``a`` (``+1``: ``i`` shown first), ``y`` of them for ``i`` (eq. binomial-model-llm); human cells ``(i, j, n, y)``.
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any, Iterator, Self, Sequence

import numpy as np
import pandas as pd

__all__ = ["J_WINS", "I_WINS", "TIE", "BOTH_BAD", "CellTable", "LLMCells", "HumanCells", "RecordIds", "Rows"]

# Outcome codes of a canonical row.
J_WINS, I_WINS, TIE, BOTH_BAD = 0, 1, 2, 3


def as_int64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.int64).reshape(-1)


@dataclass(frozen=True)
class CellTable:
    """Aggregated comparisons with three outcome counts (eq. binomial-model-llm / -human with ties), for both engines.

    ``judge`` (``K`` for people), items ``i < j``, display order ``a`` (``+1``: ``i`` first, ``-1``; ``0`` for people),
    ``n`` judgments, ``y`` wins of ``i``, ``tie_counts`` (default none) and ``z`` the covariates (cells x p, or None).
    """

    judge: np.ndarray
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    n: np.ndarray
    y: np.ndarray
    tie_counts: np.ndarray | None = None
    z: np.ndarray | None = None

    def __post_init__(self) -> None:
        """Fill in zero ties for a decisive table."""
        if self.tie_counts is None:
            object.__setattr__(self, "tie_counts", np.zeros(np.size(self.n), np.int64))

    @classmethod
    def from_counts(cls, judge: np.ndarray, i: np.ndarray, j: np.ndarray, a: np.ndarray, wins_i: np.ndarray,
                    wins_j: np.ndarray, tie_counts: np.ndarray, z: np.ndarray | None = None) -> "CellTable":
        """Build the table of the outcome counts ``wins_i, wins_j, tie_counts`` per cell (covariates ``z``)."""
        return cls(judge, i, j, a, wins_i + wins_j + tie_counts, wins_i, tie_counts, z)

    @classmethod
    def empty(cls, p: int = 0) -> "CellTable":
        """Return a table with no cells (``p`` covariates)."""
        e = np.zeros(0, np.int64)
        return cls(e, e, e, e, e, e, e, np.zeros((0, p)) if p else None)

    @property
    def p(self) -> int:
        """Number of covariates (columns of :attr:`z`)."""
        return 0 if self.z is None else int(self.z.shape[1])

    def __len__(self) -> int:
        """Return the number of cells."""
        return int(np.size(self.n))

    @property
    def wins_i(self) -> np.ndarray:
        """Wins of item ``i`` per cell (``y``)."""
        return self.y

    @property
    def wins_j(self) -> np.ndarray:
        """Wins of item ``j`` per cell: ``n - y - tie_counts``."""
        return self.n - self.y - self.tie_counts

    @cached_property
    def counts(self) -> np.ndarray:
        """``(m, 3)`` integer array (wins of i, wins of j, ties), formed once per table (read-only)."""
        assert self.tie_counts is not None
        out = np.rint(np.column_stack([self.wins_i, self.wins_j, self.tie_counts])).astype(np.int64).reshape(-1, 3)
        out.flags.writeable = False
        return out

    def select(self, mask: "np.ndarray | slice") -> Self:
        """Return the cells where ``mask`` is true, or in the slice (e.g. one judge's ``Omega_k``), of the same class."""
        columns: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(self, **{name: x[mask] for name, x in columns.items() if x is not None})

    def with_judge(self, g: int) -> "CellTable":
        """Return the same cells all given to judge index ``g`` (e.g. the pooled BTL, or people as judge 0)."""
        return CellTable(np.full(len(self), g, np.int64), self.i, self.j, self.a, self.n, self.y, self.tie_counts, self.z)

    def integer(self) -> "CellTable":
        """Return the table with ``int64`` indices and integer outcome counts (the Stan data)."""
        c = self.counts
        return CellTable.from_counts(as_int64(self.judge), as_int64(self.i), as_int64(self.j), as_int64(self.a), c[:, 0],
                                     c[:, 1], c[:, 2], self.z)

    def per_judgment(self) -> "CellTable":
        """One row per judgment (same likelihood up to the multinomial coefficients), outcomes in the order i, j, tie."""
        cnt = self.counts
        rows = np.repeat(np.arange(len(self)), cnt.sum(axis=1))
        outcome = np.repeat(np.tile(np.arange(3), len(self)), cnt.ravel())
        one = np.eye(3, dtype=np.int64)[outcome]
        return CellTable.from_counts(self.judge[rows], self.i[rows], self.j[rows], self.a[rows], one[:, 0], one[:, 1],
                                     one[:, 2], None if self.z is None else self.z[rows])

    def judgment_labels(self, items: Sequence[str], judges: Sequence[str]) -> list[str]:
        """Labels of the rows of :meth:`per_judgment`: cell, outcome and running number, e.g. ``gpt-4:a-b:+1/i#2``."""
        return [f"{lab}/{name}#{k + 1}" for lab, cnt in zip(self.labels(items, judges), self.counts)
                for name, c in zip(("i", "j", "tie"), cnt) for k in range(int(c))]

    def labels(self, items: Sequence[str], judges: Sequence[str]) -> list[str]:
        """``judge:item_i-item_j:a`` strings (``a`` omitted for people)."""
        it, jd = np.asarray(items, dtype=object), np.asarray(list(judges), dtype=object)
        tag = {0: "", 1: ":+1", -1: ":-1"}
        return [f"{jd[g]}:{it[i]}-{it[j]}{tag[int(np.sign(a))]}" for g, i, j, a in zip(self.judge, self.i, self.j, self.a)]


class LLMCells(CellTable):
    """Aggregated decisive LLM judgments ``(judge, i, j, a, n, y)`` (eq. binomial-model-llm); ``tie_counts`` is ignored."""

    def __init__(self, judge: np.ndarray, i: np.ndarray, j: np.ndarray, a: np.ndarray, n: np.ndarray, y: np.ndarray,
                 tie_counts: np.ndarray | None = None, z: np.ndarray | None = None) -> None:
        super().__init__(judge, i, j, a, n, y, None, z)


class HumanCells(CellTable):
    """Aggregated decisive human comparisons ``(i, j, n, y)`` (eq. binomial-model-human); ``a``, ``tie_counts`` ignored.

    ``judge``: its first entry (``K`` in :class:`Comparisons`, ``-1`` when not given).
    """

    def __init__(self, i: np.ndarray, j: np.ndarray, n: np.ndarray, y: np.ndarray, tie_counts: np.ndarray | None = None,
                 z: np.ndarray | None = None, *, judge: "int | np.ndarray" = -1, a: np.ndarray | None = None) -> None:
        m = np.size(n)
        g = np.ravel(np.asarray(judge, np.int64))
        super().__init__(np.full(m, g[0] if g.size else -1, np.int64), i, j, np.zeros(m, np.int64), n, y, None, z)


class RecordIds(abc.Sequence):
    """The distinct record ids in order of first appearance, held as one array: a read-only sequence equal to the tuple."""

    __slots__ = ("_ids",)

    def __init__(self, ids: pd.Index | Sequence[Any]) -> None:
        self._ids = ids if isinstance(ids, pd.Index) else pd.Index(list(ids), dtype=object)

    def __len__(self) -> int:
        """Return the number of records."""
        return len(self._ids)

    def __getitem__(self, k: Any) -> Any:
        """Return the id at position ``k`` (a tuple for a slice)."""
        if isinstance(k, slice):
            return tuple(self._ids[k].tolist())
        return self._ids[[k]].tolist()[0]

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the ids (Python values)."""
        return iter(self._ids.tolist())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Return the ids as an array."""
        return self._ids.to_numpy(dtype=dtype)

    def __eq__(self, other: object) -> bool:
        """Compare with another sequence of ids, e.g. a tuple."""
        if isinstance(other, (RecordIds, tuple, list)):
            return len(other) == len(self) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        """Hash as the tuple of the ids."""
        return hash(tuple(self))

    def __repr__(self) -> str:
        """Show the number of records and the first ids."""
        return f"RecordIds({len(self)} records: {list(self[:3])}{', ...' if len(self) > 3 else ''})"


@dataclass(frozen=True)
class Rows:
    """The decisive judgments one by one, in canonical coding (the record meat and leave-one-out checks).

    ``judge`` ``K`` for people; ``cell`` indexes the LLM or human cells; ``z`` 1 when ``i`` won; ``record`` the record ids.
    """

    record: np.ndarray
    judge: np.ndarray
    cell: np.ndarray
    z: np.ndarray
