"""Pairwise judgment data: validation, canonical orientation and cell aggregation.

The input is a long table with one row per judgment::

    record_id, judge, item_a, item_b, first, winner

``first`` is ``"a"`` or ``"b"`` (which response was displayed first) and ``winner``
is ``"a"``, ``"b"``, ``"tie"`` or ``"both_bad"``.  The rows of the human judge are
the human labels; their display order is ignored by the human model and may be
missing.

Every pair is stored in the canonical orientation ``i < j`` of item indices, with
``a = +1`` when item ``i`` was shown first and ``a = -1`` otherwise (paper, Sec. 3.1).
Decisive judgments are aggregated into

* LLM cells ``(k, i, j, a, n, y)``: ``n`` judgments of judge ``k`` on pair ``(i, j)``
  under order ``a``, of which ``y`` preferred item ``i`` (eq. binomial-model-llm);
* human cells ``(i, j, n, y)`` (eq. binomial-model-human).

Ties, "both bad" labels and self-comparisons are excluded from the binary models;
they are counted and reported by :meth:`Comparisons.summary`, never dropped silently.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections import abc
from dataclasses import dataclass, field
from functools import cached_property
from os import PathLike
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar, cast

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from pydial.data.features import comparison_values, covariate_names, standardize
from pydial.data.files import read_csv, read_parquet
from pydial.data.ingest import (
    COLUMNS,
    FIRST_A,
    FIRST_VALUES,
    WINNER_VALUES,
    Coded,
    Validator,
    blank_text,
    check_cells,
    check_read_memory,
    concat,
    duplicated,
    fail_rows,
    group,
    human_name,
    Keys,
    RowCoder,
    check_columns,
    pack,
    rows_text,
    triangle,
)
from pydial.data.names import NameReport, argument_name, clean, name_list, own_items
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError, DataWarning

__all__ = ["COLUMNS", "FIRST_VALUES", "WINNER_VALUES", "DUPLICATES", "SELF_PREFERENCE", "CellTable", "LLMCells",
           "HumanCells", "Rows", "Comparisons", "canonical", "item_order", "rows_text", "check_cells"]

DUPLICATES = ("keep", "drop", "raise")
FRAME_KEYWORDS = frozenset({"human_judge", "items", "drop_empty_judges", "strip_names", "allow_similar_names",
                            "duplicates", "columns", "covariates", "covariate_transform", "self_preference"})
"""The keyword arguments of :meth:`Comparisons.from_frame` (``from_csv`` and ``from_parquet`` pass them on)."""
CSV_REFUSED = frozenset({"filepath_or_buffer", "chunksize", "iterator"})
"""Keyword arguments of :func:`pandas.read_csv` that ``from_csv`` does not pass on (it reads the whole table)."""
CSV_KEYWORDS = frozenset(inspect.signature(pd.read_csv).parameters) - CSV_REFUSED - FRAME_KEYWORDS
"""The keyword arguments of :func:`pandas.read_csv` that :meth:`Comparisons.from_csv` passes on."""
FRAME_BYTES_PER_ROW = 128
"""from_frame, per judgment: the canonical frame, the decisive rows, the cells and temporaries (no covariates)."""
FRAME_BYTES_COVARIATES = (48, 44)
"""from_frame, per judgment, with covariates: once (the row codes; a cell per distinct value), and per covariate."""


def frame_bytes(rows: int, p: int = 0) -> int:
    """Estimated peak memory of :meth:`Comparisons.from_frame` beyond its input: ``rows`` judgments, ``p`` covariates.

    Measured (peak resident memory, ``VmHWM``, of 1M-row frames of text or object columns
    and continuous covariates, each judgment then a cell of its own): 103-124 B a row
    without covariates, 213 with one, 253 with two and 336 with four.
    """
    once, each = FRAME_BYTES_COVARIATES
    return rows * (FRAME_BYTES_PER_ROW + (once + each * p if p else 0))

# Outcome codes of a canonical row.
J_WINS, I_WINS, TIE, BOTH_BAD = 0, 1, 2, 3


def name_arguments(items: Any, self_preference: Any) -> tuple[list[Any] | None, dict[Any, list[Any]] | None]:
    """Check the name arguments of a reader before it reads: ``items=`` and ``self_preference=``.

    Returns them as lists (:func:`pydial.data.names.name_list`, :func:`~pydial.data.names.own_items`),
    ``None`` where not given; a value that lists no names raises :class:`~pydial.ArgumentTypeError`.
    """
    return (None if items is None else name_list(items, "items"),
            None if self_preference is None else own_items(self_preference))


def item_order(seen: set[str], items: Sequence[Any] | None) -> tuple[list[str], dict[str, int]]:
    """Item names in index order (sorted, or as given by ``items=``, as the data's names) and their index."""
    names = sorted(seen) if items is None else [str(x) for x in items]
    if items is not None:
        repeated = sorted({x for x in names if names.count(x) > 1}) if len(set(names)) != len(names) else []
        if repeated:
            raise DataError(f"items= lists the item(s) {repeated[:5]} more than once (after the names are "
                            "cleaned as the data's are: Unicode NFC, surrounding whitespace stripped)")
        unknown = sorted(seen - set(names))
        if unknown:
            raise DataError(f"items {unknown[:5]} appear in the data but not in items=")
    if len(names) < 2:
        raise DataError(f"need at least two items, found {names}")
    return names, {name: k for k, name in enumerate(names)}


def canonical(coded: Coded, item_index: np.ndarray, is_human: np.ndarray) -> dict[str, np.ndarray]:
    """Canonical coding of validated judgments: items ``i < j``, display order ``a`` and outcome.

    ``item_index`` maps the item name ids of ``coded`` to item indices.  ``a = +1`` when
    item ``i`` was shown first, ``-1`` otherwise and ``0`` on the human judge's rows;
    the outcome is ``I_WINS``, ``J_WINS``, ``TIE`` or ``BOTH_BAD``; ``self`` marks a
    comparison of an item with itself.  Small integer types: ``i, j`` int32, ``a`` and the
    outcome int8.
    """
    ia, ib = item_index[coded.item_a], item_index[coded.item_b]
    swap = ia > ib
    a = np.where((coded.first == FIRST_A) != swap, np.int8(1), np.int8(-1))
    a[is_human] = 0
    w = coded.winner  # index into WINNER_VALUES: a, b, tie (= TIE), both_bad (= BOTH_BAD)
    outcome = np.where(w >= TIE, w, np.where((w == 0) != swap, np.int8(I_WINS), np.int8(J_WINS)))
    return {"i": np.minimum(ia, ib), "j": np.maximum(ia, ib), "a": a, "outcome": outcome, "self": ia == ib}


COVARIATE_PREFIX = "cov:"
"""Prefix of the covariate columns of :attr:`Comparisons.frame` (standardized, canonical orientation)."""

SELF_PREFERENCE = "self_preference"
"""The name of the self-preference covariate (:meth:`Comparisons.with_self_preference`)."""


def covariate_columns(coded: Coded, item_index: np.ndarray, names: Sequence[str], scale: pd.Series | None
                      ) -> dict[str, np.ndarray]:
    """Return the frame columns ``cov:<name>`` of the standardized covariates of ``coded`` in canonical orientation.

    The comparison covariate changes sign with the pair's orientation (side ``a`` minus side
    ``b``), so a row whose items swap to ``i < j`` gets ``-z``.
    """
    if coded.z is None or scale is None:
        return {}
    swap = item_index[coded.item_a] > item_index[coded.item_b]
    z = np.where(swap[:, None], -coded.z, coded.z) / scale.to_numpy()
    return {COVARIATE_PREFIX + c: z[:, t] for t, c in enumerate(names)}


COLUMN_HINT = "Map other names with columns={'judge': 'annotator', 'item_a': 'model_a', ...}"
"""How the Python readers map column names (the command line says it with its options)."""


def column_names(columns: Any, optional: Sequence[str] = ()) -> dict[str, Any]:
    """Return each of the six fields' column name: ``columns`` (field -> name; the others keep their names).

    ``None`` may name a field of ``optional`` (not read).  Raises :class:`~pydial.ArgumentTypeError`
    for a ``columns`` that is not a mapping or a name that is not text, :class:`~pydial.ArgumentError`
    for an unknown field.
    """
    if columns is None:
        columns = {}
    if not isinstance(columns, Mapping):
        raise ArgumentTypeError(f"columns must be a mapping of field to column name, e.g. {{'judge': 'annotator'}}, "
                                f"got {columns!r}")
    unknown = [k for k in columns if k not in COLUMNS]
    if unknown:
        raise ArgumentError(f"columns names unknown field(s) {unknown}; the fields are {list(COLUMNS)}")
    for k, v in columns.items():
        if not (isinstance(v, str) or (v is None and k in optional)):
            raise ArgumentTypeError(f"columns[{k!r}] must be a column name (str), got {v!r}")
    return {c: columns.get(c, c) for c in COLUMNS}


def check_frame(df: Any, what: str) -> None:
    """Refuse a ``df`` that is not a :class:`pandas.DataFrame` with one level of column names (:class:`DataError`)."""
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if isinstance(df.columns, pd.MultiIndex):
        raise DataError(f"{what} has {df.columns.nlevels} levels of column names (a MultiIndex, e.g. "
                        f"{df.columns[0]!r}); flatten them to one name per column, e.g. with "
                        "df.columns = ['_'.join(map(str, c)) for c in df.columns]")


def unknown_keywords(caller: str, given: Iterable[str], known: Iterable[str], accepts: str) -> None:
    """Refuse the keywords of ``given`` not in ``known`` with :class:`~pydial.ArgumentTypeError`.

    The message names them, suggests the likely intended keyword of a misspelt one, and
    says what ``caller`` accepts (``accepts``).
    """
    from difflib import get_close_matches

    known = set(known)
    unknown = [k for k in given if k not in known]
    if unknown:
        near = {k: [f"columns={{{k!r}: ...}}"] if k in COLUMNS else [repr(m) for m in get_close_matches(k, sorted(known), n=1)]
                for k in unknown}
        hint = "".join(f"; did you mean {m[0]} for {k!r}?" for k, m in near.items() if m)
        raise ArgumentTypeError(f"{caller}() got unknown keyword argument(s) {unknown}{hint or '.'} It accepts {accepts}")


F = TypeVar("F", bound=Callable[..., Any])


def frame_keywords(method: F) -> F:
    """Make ``Comparisons.from_frame`` refuse an unknown keyword with :func:`unknown_keywords`, not a plain TypeError."""
    known = FRAME_KEYWORDS | {"df"}

    @functools.wraps(method)
    def checked(cls: Any, *args: Any, **kwargs: Any) -> Any:
        unknown_keywords("Comparisons.from_frame", kwargs, known, ", ".join(sorted(FRAME_KEYWORDS)))
        return method(cls, *args, **kwargs)

    return cast(F, checked)


def require_comparisons(data: Any, argument: str = "data") -> "Comparisons":
    """Return ``data`` if it is a :class:`Comparisons`, else raise :class:`~pydial.ArgumentTypeError` naming ``argument``.

    A DataFrame (the long table itself) gets the call that builds the comparisons from it.
    """
    if not isinstance(data, Comparisons):
        hint = ("; build it from the long table with pydial.Comparisons.from_frame(df)" if isinstance(data, pd.DataFrame)
                else " (e.g. pydial.Comparisons.from_frame(df) or pydial.Comparisons.from_csv(path))")
        raise ArgumentTypeError(f"{argument} must be a pydial.Comparisons, got {type(data).__name__}{hint}")
    return data


def covariate_sides(names: Sequence[str] | None) -> list[str]:
    """Return the per-side columns ``<name>_a``, ``<name>_b`` of the covariates ``names`` (none for ``None``)."""
    return [f"{c}{side}" for c in names or () for side in ("_a", "_b")]


def factorize_records(rec: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize(rec)``: codes in order of first appearance (``-1`` where missing) and the distinct ids.

    Sorted integer ids (e.g. ``0, 0, 1, 2, 2, ...``) are coded by their runs, without hashing.
    """
    if isinstance(rec.dtype, np.dtype) and rec.dtype.kind in "iu" and len(rec):
        x = rec.to_numpy()
        step = x[1:] != x[:-1]
        if (x[1:] >= x[:-1]).all():
            codes = np.zeros(x.size, np.int64)
            np.cumsum(step, out=codes[1:])
            return codes, pd.Index(x[np.concatenate([[True], step])])
    return pd.factorize(rec, use_na_sentinel=True)


NAMES_CHANGED = "names changed (whitespace / invisible characters stripped, Unicode NFC)"
"""The row of :meth:`Comparisons.summary` that counts the names cleaned (:mod:`pydial.data.names`)."""


def report_changes(data: "Comparisons", v: Validator) -> None:
    """Record the names ``v`` cleaned in ``data.summary()`` and warn (:class:`DataWarning`) if any."""
    report = NameReport()
    v.judges.report(report)
    v.items.report(report)
    data.frame.attrs["names_stripped"] = report.text()
    if report.n_stripped:
        warnings.warn(f"{report.what()} from {report.text()}", DataWarning, stacklevel=3)


def _int64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.int64).reshape(-1)


@dataclass(frozen=True)
class CellTable:
    """Aggregated comparisons with three outcome counts: the one cell table of both engines.

    The cells of the binomial models, eq. binomial-model-llm (judge ``k``, pair
    ``(i, j)``, order ``a``) and eq. binomial-model-human (pair ``(i, j)``), with tie
    counts for the tie models.  Every table of cells is a :class:`CellTable`: the decisive
    LLM and human cells of :class:`Comparisons` (:class:`LLMCells`, :class:`HumanCells`),
    the cells with tie counts (:meth:`Comparisons.cell_table`), the cells of the tie models
    and of the Stan data (:mod:`pydial.stan.schema`).

    Attributes
    ----------
    judge : int array
        Judge index ``k`` in ``0..K-1``; ``K`` for people.
    i, j : int arrays
        Canonical item indices ``i < j``.
    a : int array
        Display order, ``+1`` when item ``i`` was shown first, ``-1`` otherwise, ``0`` for people.
    n, y : arrays
        Judgments per cell (ties included) and wins of item ``i``.
    ties : array, optional
        Ties per cell (default none: a decisive table).
    z : float array (cells x p), optional
        The standardized comparison covariates of the cell's judgments (canonical orientation:
        item ``i`` as side a, see :mod:`pydial.data.features`); judgments with other covariate
        values are other cells.  ``None``: no covariates.
    """

    judge: np.ndarray
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    n: np.ndarray
    y: np.ndarray
    ties: np.ndarray | None = None
    z: np.ndarray | None = None

    def __post_init__(self) -> None:
        """Fill in zero ties for a decisive table."""
        if self.ties is None:
            object.__setattr__(self, "ties", np.zeros(np.size(self.n), np.int64))

    @classmethod
    def from_counts(cls, judge: np.ndarray, i: np.ndarray, j: np.ndarray, a: np.ndarray, wins_i: np.ndarray,
                    wins_j: np.ndarray, ties: np.ndarray, z: np.ndarray | None = None) -> "CellTable":
        """Build the table of the outcome counts ``wins_i, wins_j, ties`` per cell (covariates ``z``)."""
        return cls(judge, i, j, a, wins_i + wins_j + ties, wins_i, ties, z)

    @classmethod
    def empty(cls, p: int = 0) -> "CellTable":
        """Return a table with no cells (``p`` covariates)."""
        e = np.zeros(0, np.int64)
        return cls(e, e, e, e, e, e, e, np.zeros((0, p)) if p else None)

    @property
    def p(self) -> int:
        """Number of covariates (columns of :attr:`z`)."""
        return 0 if self.z is None else int(self.z.shape[1])

    def _columns(self) -> tuple[np.ndarray | None, ...]:
        return (self.judge, self.i, self.j, self.a, self.n, self.y, self.ties, self.z)

    def __len__(self) -> int:
        """Return the number of cells."""
        return int(np.size(self.n))

    @property
    def wins_i(self) -> np.ndarray:
        """Wins of item ``i`` per cell (``y``)."""
        return self.y

    @property
    def wins_j(self) -> np.ndarray:
        """Wins of item ``j`` per cell: ``n - y - ties``."""
        return self.n - self.y - self.ties

    @cached_property
    def counts(self) -> np.ndarray:
        """``(m, 3)`` integer array (wins of i, wins of j, ties), formed once per table (read-only)."""
        assert self.ties is not None
        out = np.rint(np.column_stack([self.wins_i, self.wins_j, self.ties])).astype(np.int64).reshape(-1, 3)
        out.flags.writeable = False
        return out

    def select(self, mask: "np.ndarray | slice") -> "CellTable":
        """Return the cells where ``mask`` is true, or in the slice (e.g. one judge's ``Omega_k``), as a :class:`CellTable`."""
        return CellTable(*(cast(np.ndarray, None if x is None else x[mask]) for x in self._columns()))

    def with_judge(self, g: int) -> "CellTable":
        """Return the same cells all given to judge index ``g`` (e.g. the pooled BTL, or people as judge 0)."""
        return CellTable(np.full(len(self), g, np.int64), self.i, self.j, self.a, self.n, self.y, self.ties, self.z)

    def integer(self) -> "CellTable":
        """Return the table with ``int64`` indices and integer outcome counts (the Stan data)."""
        c = self.counts
        return CellTable.from_counts(_int64(self.judge), _int64(self.i), _int64(self.j), _int64(self.a), c[:, 0],
                                     c[:, 1], c[:, 2], self.z)

    def per_judgment(self) -> "CellTable":
        """One row per judgment.

        A cell with counts ``(w_i, w_j, t)`` becomes ``w_i`` rows ``(1, 0, 0)``, ``w_j`` rows
        ``(0, 1, 0)`` and ``t`` rows ``(0, 0, 1)``, in cell order.  The likelihood is the same up
        to the multinomial coefficients (constants); each row's ``log_lik`` is then the
        log-probability of one judgment.
        """
        cnt = self.counts
        rows = np.repeat(np.arange(len(self)), cnt.sum(axis=1))
        outcome = np.concatenate([np.repeat(np.arange(3), c) for c in cnt]) if len(self) else np.zeros(0, np.int64)
        one = np.eye(3, dtype=np.int64)[outcome]
        return CellTable.from_counts(self.judge[rows], self.i[rows], self.j[rows], self.a[rows], one[:, 0], one[:, 1],
                                     one[:, 2], None if self.z is None else self.z[rows])

    def judgment_labels(self, items: Sequence[str], judges: Sequence[str]) -> list[str]:
        """Labels of the rows of :meth:`per_judgment`.

        The cell label, the outcome (``i``, ``j``, ``tie``) and a running number within the
        cell and outcome, e.g. ``gpt-4:a-b:+1/i#2``.
        """
        out: list[str] = []
        for lab, cnt in zip(self.labels(items, judges), self.counts):
            for o, name in enumerate(("i", "j", "tie")):
                out.extend(f"{lab}/{name}#{k + 1}" for k in range(int(cnt[o])))
        return out

    def labels(self, items: Sequence[str], judges: Sequence[str]) -> list[str]:
        """``judge:item_i-item_j:a`` strings (``a`` omitted for people)."""
        it = np.asarray(items, dtype=object)
        jd = np.asarray(list(judges), dtype=object)
        out = []
        for g, i, j, a in zip(self.judge, self.i, self.j, self.a):
            tag = "" if a == 0 else (":+1" if a > 0 else ":-1")
            out.append(f"{jd[g]}:{it[i]}-{it[j]}{tag}")
        return out


class LLMCells(CellTable):
    """Aggregated decisive LLM judgments (paper eq. binomial-model-llm): a :class:`CellTable` without ties.

    ``LLMCells(judge, i, j, a, n, y)``: judge ``k`` in ``0..K-1``, ``a = +1`` when item ``i``
    was shown first, ``n`` the decisive judgments ``n_kij^(a)`` and ``y`` the wins of item
    ``i`` ``Y_kij^(a)`` (float arrays).  Decisive: ``ties`` is always zero (an argument
    ``ties``, e.g. from :func:`dataclasses.replace`, is ignored).
    """

    def __init__(self, judge: np.ndarray, i: np.ndarray, j: np.ndarray, a: np.ndarray, n: np.ndarray, y: np.ndarray,
                 ties: np.ndarray | None = None, z: np.ndarray | None = None) -> None:
        super().__init__(judge, i, j, a, n, y, None, z)

    def select(self, mask: "np.ndarray | slice") -> "LLMCells":
        """Return the cells where ``mask`` is true, or in the slice (e.g. one judge's ``Omega_k``)."""
        return LLMCells(*(cast(np.ndarray, None if x is None else x[mask]) for x in self._columns()))


class HumanCells(CellTable):
    """Aggregated decisive human comparisons (paper eq. binomial-model-human): a :class:`CellTable` without ties.

    ``HumanCells(i, j, n, y)``: ``n`` comparisons of the pair and ``y`` wins of item ``i``
    (float arrays); ``a = 0`` and the judge index ``judge`` (``K`` in :class:`Comparisons`,
    ``-1`` when not given).  Decisive: ``ties`` is always zero; ``a`` and ``ties`` given
    (e.g. by :func:`dataclasses.replace`) are ignored, and an array ``judge`` gives its first entry.
    """

    def __init__(self, i: np.ndarray, j: np.ndarray, n: np.ndarray, y: np.ndarray, ties: np.ndarray | None = None,
                 z: np.ndarray | None = None, *, judge: "int | np.ndarray" = -1, a: np.ndarray | None = None) -> None:
        m = np.size(n)
        g = np.ravel(np.asarray(judge, np.int64))
        super().__init__(np.full(m, g[0] if g.size else -1, np.int64), i, j, np.zeros(m, np.int64), n, y, None, z)


class RecordIds(abc.Sequence):
    """The distinct record ids in order of first appearance: a read-only sequence (compares equal to the tuple).

    Held as one array, not as a tuple of Python objects (about 36 bytes per record,
    0.36 GB for ten million records); indexing gives Python values, a slice a tuple.
    """

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
    """The decisive judgments one by one, in canonical coding.

    ``judge`` is ``K`` for the human judge; ``cell`` indexes the LLM or the human
    cell table; ``z`` is 1 when item ``i`` won; ``record`` indexes
    :attr:`Comparisons.record_ids`.  Used by the record-clustered meat and by
    leave-one-out checks.
    """

    record: np.ndarray
    judge: np.ndarray
    cell: np.ndarray
    z: np.ndarray


COUNT_COLUMNS: tuple[str, ...] = ("judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties")
"""Required columns of :meth:`Comparisons.from_counts` (``both_bad`` is optional)."""

_COUNTS = ("wins_a", "wins_b", "ties", "both_bad")  # in the order of WINNER_VALUES
MAX_TOTAL = 2**53  # judgments in all: the cell tables hold counts as float64, exact below 2**53


def _count_column(values: pd.Series, col: str, index: pd.Index) -> np.ndarray:
    """Validate one count column: non-negative integers below ``2**53`` (bad rows named)."""
    num = pd.to_numeric(values, errors="coerce")
    f = np.asarray(num.to_numpy(dtype=float, na_value=np.nan))
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(f) | (f < 0) | (f != np.round(f)) | (f >= MAX_TOTAL)
    if bad.any():
        raise DataError(f"column {col!r} must hold non-negative integer counts below 2**53; bad values at "
                        f"{rows_text(index[bad])}")
    if pd.api.types.is_integer_dtype(num.dtype):
        return np.asarray(num.to_numpy(), dtype=np.int64)  # exact below 2**53, as checked
    return f.astype(np.int64)


@dataclass(frozen=True)
class Comparisons:
    """Validated pairwise judgments of LLM judges and (optionally) people.

    Build with :meth:`from_frame` or :meth:`from_csv`.

    Attributes
    ----------
    items : tuple of str
        Item names; position is the item index (``N = len(items)``).
    judges : tuple of str
        LLM judge names; position is the judge index ``k`` (``K = len(judges)``).
    human_judge : str
        The judge name whose rows are the human labels.
    llm : LLMCells
        Decisive LLM judgments aggregated by ``(k, i, j, a)``.
    human : HumanCells
        Decisive human judgments aggregated by ``(i, j)``.
    rows : Rows or None
        Decisive judgments one by one (LLM rows first, then human rows); ``None``
        for aggregated input (:meth:`from_counts`, :func:`pydial.read_comparisons`),
        which carries no record ids.
    record_ids : RecordIds or tuple
        Distinct record ids, a read-only sequence (:class:`RecordIds`); ``rows.record``
        indexes it (an empty tuple for aggregated input).
    frame : pandas.DataFrame
        All validated rows in canonical coding (columns ``record_id, judge, i, j,
        a, outcome, self``), including the excluded ones; for aggregated input one
        row per ``(judge, i, j, a, outcome)`` with its ``count`` instead of one row
        per judgment.
    """

    items: tuple[str, ...]
    judges: tuple[str, ...]
    human_judge: str
    llm: LLMCells
    human: HumanCells
    rows: Rows | None
    record_ids: Sequence[Any]
    frame: pd.DataFrame = field(repr=False)
    covariate_scale: pd.Series | None = field(default=None, repr=False)
    """Root mean square (standard deviation about 0) of each comparison covariate (a Series by name); None without."""
    covariate_transform: str | None = field(default=None, repr=False)
    """``"difference"`` or ``"normalized"`` (:mod:`pydial.data.features`), ``None`` without covariates."""
    self_preference: Mapping[str, tuple[str, ...]] | None = field(default=None, repr=False)
    """The own items of each judge of the self-preference covariate (:meth:`with_self_preference`); None without."""
    # Results derived from these (immutable) data and shared by several fits: design
    # checks, the structured LLM-only fit, its Hessian.  init=False: a copy made by
    # dataclasses.replace (other cells) starts with an empty cache.
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ build
    @classmethod
    @frame_keywords
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        human_judge: Any = "human",
        items: Sequence[Any] | None = None,
        drop_empty_judges: bool = False,
        strip_names: bool = True,
        allow_similar_names: bool = False,
        duplicates: str = "keep",
        columns: Mapping[str, str] | None = None,
        covariates: Sequence[str] | None = None,
        covariate_transform: str = "difference",
        self_preference: Mapping[str, Sequence[str]] | None = None,
    ) -> "Comparisons":
        """Validate a long table of judgments and aggregate it to cells.

        Parameters
        ----------
        df : pandas.DataFrame
            One row per judgment.
        human_judge : str or number, default "human"
            Value of the judge column that marks human labels; converted to text like
            the judge names (``0`` matches an integer judge column, ``"0"`` a CSV).
        items : sequence of str, optional
            Item order (defines the item index and hence canonical orientation).
            Defaults to the sorted distinct item names.  Items listed here but never
            compared are kept (they get scores only through the LLM space).
        drop_empty_judges : bool, default False
            An LLM judge with no decisive judgment (every row a tie, "both bad" or a
            self-comparison) raises :class:`DataError`; with ``True`` it is removed
            and counted in :meth:`summary` instead.
        strip_names : bool, default True
            Clean judge and item names: Unicode NFC, surrounding whitespace and invisible
            characters (zero-width space, byte-order mark, soft hyphen ...) stripped; how
            many names changed is reported by :meth:`summary` and a :class:`DataWarning`.
        allow_similar_names : bool, default False
            Keep names that differ only by letter case, whitespace, invisible characters,
            Unicode normal form or numeric type (``4`` and ``4.0``) as distinct; by default
            they raise :class:`DataError` naming both spellings (see :mod:`pydial.data.names`).
        duplicates : {"keep", "drop", "raise"}, default "keep"
            Rows identical in all six columns (same record, judge, pair, display
            order and winner).  ``"keep"`` counts them as separate judgments,
            ``"drop"`` keeps the first of each group; both report the count in
            :meth:`summary` and a :class:`DataWarning`.  ``"raise"`` refuses them.
        columns : mapping of str to str, optional
            The column of ``df`` holding each of the six fields of the long format
            (``record_id``, ``judge``, ``item_a``, ``item_b``, ``first``, ``winner``) that is
            named otherwise, e.g. ``{"judge": "annotator"}``; the other fields keep their names.
        covariates : sequence of str, optional
            Response covariates (beyond the paper: style control): for each name the numeric
            columns ``<name>_a`` and ``<name>_b`` of the two responses (:func:`pydial.features.style`
            computes the usual ones from the texts).  The comparison covariate of a judgment
            is their ``covariate_transform``, divided by its root mean square over the rows
            (the standard deviation about 0, :attr:`covariate_scale`); judgments of one cell with other covariate values are
            other cells.
        covariate_transform : {"difference", "normalized"}, default "difference"
            ``x_a - x_b``, or LMArena's ``(x_a - x_b) / (x_a + x_b)``
            (:func:`pydial.features.comparison_covariates`).
        self_preference : mapping of str to sequence of str, optional
            Each LLM judge's own items (``{"gpt-4": ["gpt-4-0613", "gpt-4-turbo"]}``): adds the
            covariate ``"self_preference"`` of :meth:`with_self_preference` after the others.

        Notes
        -----
        Judge and item names are text (:mod:`pydial.data.names`): string cells are used
        as written, other cells through :func:`str` (``4 -> "4"``, ``4.0 -> "4.0"``).
        ``human_judge`` is converted the same way, so ``human_judge=0`` matches an
        integer judge column.

        Raises
        ------
        DataError
            Missing columns, missing values, list / dict cells, unknown ``first`` /
            ``winner`` values, blank judge or item names, two spellings of one
            name, refused duplicates, or an LLM judge without decisive judgments; a missing,
            non-numeric, infinite or constant covariate (naming the column and rows); a
            needed column twice, or MultiIndex columns.
        ArgumentError
            ``human_judge`` is not a name, ``items`` is not a list of names (e.g. a string),
            ``self_preference`` does not map judges to names (e.g. ``{"j": None}``), ``columns``
            names an unknown field.
        ArgumentTypeError
            ``columns`` is not a mapping of field to column name.

        Examples
        --------
        >>> import pandas as pd
        >>> import pydial
        >>> df = pd.DataFrame({
        ...     "record_id": [1, 1, 2, 2, 3],
        ...     "judge": ["human", "gpt-4", "human", "gpt-4", "gpt-4"],
        ...     "item_a": ["m1", "m1", "m2", "m2", "m1"],
        ...     "item_b": ["m2", "m2", "m3", "m3", "m3"],
        ...     "first": ["", "a", "", "b", "a"],
        ...     "winner": ["a", "a", "b", "tie", "b"]})
        >>> data = pydial.Comparisons.from_frame(df)
        >>> data.N, data.K, data.n_human, data.n_llm
        (3, 1, 2, 2)

        Columns named otherwise are mapped by ``columns``:

        >>> renamed = df.rename(columns={"judge": "annotator"})
        >>> pydial.Comparisons.from_frame(renamed, columns={"judge": "annotator"}).n_llm
        2
        """
        mapping = column_names(columns)
        record_id = mapping["record_id"]
        check_frame(df, "the table")
        items, own = name_arguments(items, self_preference)
        cov_names = None if covariates is None else covariate_names(covariates)
        check_columns(df.columns, [*mapping.values(), *covariate_sides(cov_names)], "the table")
        missing = [f"{v!r} (for {k})" if k != v else repr(v) for k, v in mapping.items() if v not in df.columns]
        if missing:
            raise DataError(
                f"missing column(s) {', '.join(missing)}; the table has columns {list(df.columns)}. {COLUMN_HINT}"
            )
        if duplicates not in DUPLICATES:
            raise ArgumentError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
        if len(df) == 0:
            raise DataError("the comparison table has no rows")
        check_read_memory(frame_bytes(len(df), len(cov_names or ())), f"Comparisons.from_frame of {len(df):,} rows",
                          "aggregate the judgments to counts first (Comparisons.from_counts, or pydial.read_comparisons "
                          "for a file), or read a part of the table")
        human_judge = human_name(human_judge, strip_names)
        v = Validator(mapping, human_judge, strip=strip_names, allow_similar=allow_similar_names)
        rec = df[record_id]
        if rec.dtype == object and infer_dtype(rec, skipna=True).startswith("mixed"):
            check_cells(rec.to_frame("record_id"), mapping)
        rec_codes, rec_ids = factorize_records(rec)
        no_id = rec_codes < 0
        blank = np.flatnonzero(blank_text(rec_ids))  # a whitespace-only id is a blank cell: missing, as in a CSV
        if blank.size:
            no_id |= np.isin(rec_codes, blank)
        fail_rows(f"missing values in column {record_id!r}", df.index, no_id)
        unique = len(rec_ids) == len(df)  # every record id differs: no duplicated row
        coded = v.chunk({c: df[mapping[c]] for c in COLUMNS[1:]}, df.index, spelled=not unique)
        if cov_names is not None:
            coded.z = comparison_values(df, cov_names, transform=covariate_transform)
        dup = np.zeros(len(df), bool)
        if coded.spelled is not None:
            dup = duplicated(pack([rec_codes, coded.judge, coded.item_a, coded.item_b, coded.spelled],
                                  [len(rec_ids), len(v.judges.texts), len(v.items.texts), len(v.items.texts),
                                   int(coded.spelled.max()) + 1]))
        n_dup = int(dup.sum())
        if n_dup and duplicates == "raise":
            raise DataError(f"{n_dup} duplicated row(s) (identical in all six columns) at "
                            f"{rows_text(df.index[dup])}; pass duplicates='keep' or 'drop'")
        record, index = rec.array, df.index
        if n_dup and duplicates == "drop":
            coded, rec_codes, record, index = coded.select(~dup), rec_codes[~dup], record[~dup], index[~dup]
        v.finish(items)
        names, item_index = cls._items(v, items)
        is_human = coded.judge == v.judges.ids.get(human_judge, -1)
        scale = None if cov_names is None or coded.z is None else standardize(
            coded.z, cov_names, transform=covariate_transform)[1]
        canon = pd.DataFrame({"record_id": record, "judge": pd.Categorical.from_codes(coded.judge, v.judges.texts),
                              **canonical(coded, item_index, is_human),
                              **covariate_columns(coded, item_index, cov_names or (), scale)}, index=index, copy=False)
        del coded
        out = cls._finish(canon, is_human, names, human_judge, drop_empty_judges, records=(rec_codes, rec_ids),
                          covariates=(scale, covariate_transform if scale is not None else None))
        out.frame.attrs["duplicated_rows"] = (n_dup, "dropped" if duplicates == "drop" else "kept")
        report_changes(out, v)
        if own is not None:
            out = out.with_self_preference(own, strip_names=strip_names)
        if n_dup:
            warnings.warn(f"{n_dup} duplicated row(s) (identical in all six columns) "
                          f"{'dropped' if duplicates == 'drop' else 'kept as separate judgments'} "
                          f"at {rows_text(df.index[dup], 3)}", DataWarning, stacklevel=2)
        return out

    @staticmethod
    def _items(v: Validator, items: Sequence[Any] | None) -> tuple[list[str], np.ndarray]:
        """Item names in index order (:func:`item_order`) and the item index of each item name id of ``v``."""
        given = None if items is None else [v.items.text(x, f"items[{k}]") for k, x in enumerate(name_list(items, "items"))]
        names, index = item_order(set(v.items.texts), given)
        return names, np.asarray([index[t] for t in v.items.texts], dtype=np.int32)

    @classmethod
    def _finish(cls, canon: pd.DataFrame, is_human: np.ndarray, names: Sequence[str], human_judge: str,
                drop_empty_judges: bool, records: tuple[np.ndarray, pd.Index] | None = None,
                covariates: tuple[pd.Series | None, str | None] = (None, None)) -> "Comparisons":
        """List the LLM judges (dropping or refusing those without a decisive judgment) and build."""
        judge = canon["judge"].astype("category").cat
        codes, cats = judge.codes.to_numpy(), judge.categories
        outcome = canon["outcome"].to_numpy()
        decisive = ~canon["self"].to_numpy(bool) & ((outcome == I_WINS) | (outcome == J_WINS))
        if "count" in canon.columns:
            decisive &= canon["count"].to_numpy() > 0
        seen = np.bincount(codes[~is_human], minlength=len(cats)) > 0
        has = np.bincount(codes[decisive & ~is_human], minlength=len(cats)) > 0
        llm_names = sorted(cats[seen])
        empty = sorted(cats[seen & ~has])
        dropped: tuple[str, ...] = ()
        if empty and not drop_empty_judges:
            raise DataError(
                f"judge(s) {empty} have no decisive judgment (all ties, 'both bad' or self-comparisons); "
                "pass drop_empty_judges=True (--drop-empty-judges) to remove them (they are then counted in summary())"
            )
        if empty:
            dropped = tuple(empty)
            llm_names = [k for k in llm_names if k not in dropped]
        return cls._build(canon, tuple(names), tuple(llm_names), human_judge, dropped, records, covariates)

    @classmethod
    def from_counts(cls, df: pd.DataFrame, *, human_judge: str = "human", items: Sequence[str] | None = None,
                    drop_empty_judges: bool = False, strip_names: bool = True,
                    allow_similar_names: bool = False, covariates: Sequence[str] | None = None,
                    covariate_transform: str = "difference",
                    self_preference: Mapping[str, Sequence[str]] | None = None) -> "Comparisons":
        """Build from pre-aggregated counts, validated with the rules of :meth:`from_frame`.

        The result has no record ids, so ``cov_type="record"`` is refused with
        :class:`DataError`; every other covariance equals the one computed from the rows
        the counts came from (the binomial models depend on the judgments only through
        the cell counts: the paper's binomial models of the LLM and the human judgments).

        Parameters
        ----------
        df : pandas.DataFrame
            Columns ``judge, item_a, item_b, first, wins_a, wins_b, ties`` and optionally
            ``both_bad``: the number of judgments of ``judge`` on ``(item_a, item_b)``
            shown in order ``first`` (``"a"`` or ``"b"``, as in the long format; ignored
            and may be empty on the human judge's rows) won by ``item_a``, by
            ``item_b``, tied and judged both bad.  Rows with the same key are summed.
        human_judge : str, default "human"
        items : sequence of str, optional
            Item order (as in :meth:`~pydial.Comparisons.from_frame`).
        drop_empty_judges, strip_names, allow_similar_names : bool
            As in :meth:`~pydial.Comparisons.from_frame`: names are text (``4`` and ``4.0``
            are two spellings of one name and refused), stripped of surrounding whitespace
            (reported), and two names differing only by case or whitespace are refused.
        covariates, covariate_transform
            As in :meth:`~pydial.Comparisons.from_frame`: the columns ``<name>_a``, ``<name>_b``
            of a row are the covariates of all its judgments; the root mean square is over
            the judgments (rows weighted by their counts).
        self_preference : mapping of str to sequence of str, optional
            As in :meth:`~pydial.Comparisons.from_frame` (:meth:`with_self_preference`).

        Raises
        ------
        DataError
            Missing columns, missing or blank names, an unknown ``first`` on an LLM row,
            or counts that are not non-negative integers or sum to ``2**53`` or more (the
            rows are named).
        """
        check_frame(df, "the count table")
        items, own = name_arguments(items, self_preference)
        cov_names = None if covariates is None else covariate_names(covariates)
        check_columns(df.columns, [*COUNT_COLUMNS, "both_bad", *covariate_sides(cov_names)], "the count table")
        missing = [c for c in COUNT_COLUMNS if c not in df.columns]
        if missing:
            raise DataError(f"missing column(s) {missing} for aggregated counts; the table has columns {list(df.columns)} "
                            f"(need {list(COUNT_COLUMNS)}, optional 'both_bad')")
        v = Validator({c: c for c in COLUMNS[1:]}, human_name(human_judge, strip_names), strip=strip_names,
                      allow_similar=allow_similar_names)
        coded = v.chunk({c: df[c] for c in COUNT_COLUMNS[:4]}, df.index, with_winner=False)
        if cov_names is not None:
            coded.z = comparison_values(df, cov_names, transform=covariate_transform)
        parts = []
        for w, col in enumerate(_COUNTS):
            if col not in df.columns:
                continue
            n = _count_column(df[col], col, df.index)
            part = coded.select(n > 0)
            parts.append(Coded(part.judge, part.item_a, part.item_b, part.first, np.full(len(part), w, np.int8), n[n > 0],
                               z=part.z))
        v.finish(items)
        out = cls.from_coded(v, concat(parts), items, drop_empty_judges, cov_names, covariate_transform)
        return out if own is None else out.with_self_preference(own, strip_names=strip_names)

    @classmethod
    def from_coded(cls, v: Validator, coded: Coded, items: Sequence[Any] | None,
                   drop_empty_judges: bool = False, covariates: Sequence[str] | None = None,
                   covariate_transform: str = "difference") -> "Comparisons":
        """Build aggregated data from validated counts (``coded.count``, or rows as read; the names of ``v``).

        With ``covariates`` (names of the columns of ``coded.z``) the covariates are standardized
        over the judgments and each distinct value is a key of its own.

        The common end of :meth:`from_counts` and :func:`pydial.read_comparisons`.

        The canonical frame holds one row per ``(judge, i, j, a, outcome)`` with its
        ``count``, judges in name order, whatever the order or chunking of the input.
        """
        names, item_index = cls._items(v, items)
        total = float(len(coded) if coded.count is None else coded.count.sum(dtype=float))
        if total == 0:
            raise DataError("the count table holds no judgment (all counts are 0)")
        if total >= MAX_TOTAL:
            raise DataError(f"the counts sum to {total:.3g} judgments, 2**53 or more; counts that large are not exact")
        texts = np.asarray(v.judges.texts, dtype=object)
        order = np.argsort(texts, kind="stable")
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(order.size)
        human = v.judges.ids.get(v.human_judge, -1)
        c = canonical(coded, item_index, coded.judge == human)
        i, j = c["i"].astype(np.int64), c["j"].astype(np.int64)
        scale, rc = None, None
        if covariates is not None and coded.z is not None:
            scale = standardize(coded.z, covariates, weights=coded.count, transform=covariate_transform)[1]
            rc = RowCoder(np.column_stack(list(covariate_columns(coded, item_index, covariates, scale).values())))
        keys = Keys((len(texts), len(names) * (len(names) + 1) // 2, 3, 4,  # pairs i <= j counted once
                     *(() if rc is None else (len(rc),))))
        key = keys.encode([rank[coded.judge], j * (j + 1) // 2 + i, c["a"] + 1, c["outcome"],
                           *(() if rc is None else (rc.codes,))])
        weights = coded.count
        del coded, c, i, j  # the rows (often the caller's only copy) are no longer needed
        uk, inv = group(key)
        del key
        count = np.bincount(inv, weights=weights, minlength=uk.size).astype(np.int64, copy=False)
        del inv, weights
        judge, pair, a, outcome, *zc = keys.decode(uk)
        del uk
        cov: dict[str, np.ndarray] = {}
        if scale is not None and rc is not None:
            cov = {COVARIATE_PREFIX + name: rc.table[zc[0], t] for t, name in enumerate(scale.index)}
        j, i = triangle(pair)
        del pair
        canon = pd.DataFrame({"record_id": None, "judge": pd.Categorical.from_codes(judge, texts[order].tolist()),
                              "i": i.astype(np.int32), "j": j.astype(np.int32), "a": (a - 1).astype(np.int8),
                              "outcome": outcome.astype(np.int8), "self": i == j, **cov, "count": count}, copy=False)
        del i, j, a, outcome, count
        out = cls._finish(canon, judge == (rank[human] if human >= 0 else -1), names, v.human_judge,
                          drop_empty_judges, covariates=(scale, covariate_transform if scale is not None else None))
        report_changes(out, v)
        return out

    @classmethod
    def from_csv(cls, path: str | PathLike[str], **kwargs: Any) -> "Comparisons":
        """Read a long-format CSV and pass it to :meth:`from_frame`.

        Every column is read as text exactly as written (``dtype=str``,
        ``keep_default_na=False``): item ``007`` stays ``"007"``, ``3.10`` stays
        ``"3.10"``, and ``NA`` / ``None`` are names.  Only an empty (or blank) cell is
        missing.  Keyword arguments are those of :meth:`from_frame` (``columns``,
        ``human_judge``, ``items``, name and duplicate handling); remaining ones go to
        :func:`pandas.read_csv` (all of its keywords but ``chunksize`` and ``iterator``).

        Raises
        ------
        DataError
            The file cannot be read or is empty (also a truncated or corrupt gzip file), a
            column it needs is named twice in the header (pandas would read the first), or
            :meth:`from_frame` refuses it.
        ArgumentTypeError
            A keyword argument of neither :meth:`from_frame` nor :func:`pandas.read_csv`
            (e.g. a misspelt one, named with the likely intended keyword).
        """
        ours = {k: v for k, v in kwargs.items() if k in FRAME_KEYWORDS}
        theirs = {k: v for k, v in kwargs.items() if k not in FRAME_KEYWORDS}
        unknown_keywords("Comparisons.from_csv", theirs, CSV_KEYWORDS | FRAME_KEYWORDS,
                         f"those of from_frame ({', '.join(sorted(FRAME_KEYWORDS))}) and of pandas.read_csv except "
                         f"{sorted(CSV_REFUSED)}")
        name_arguments(ours.get("items"), ours.get("self_preference"))  # before the file is read
        cov = ours.get("covariates")
        wanted = list(column_names(ours.get("columns")).values()) + covariate_sides(None if cov is None else covariate_names(cov))
        df = read_csv(path, wanted, **theirs)
        return cls.from_frame(df, **ours)

    @classmethod
    def from_parquet(cls, path: str | PathLike[str], **kwargs: Any) -> "Comparisons":
        """Read a long-format Parquet file and pass it to :meth:`from_frame`.

        Only the six columns are read (as mapped by ``columns``; the keyword arguments of
        :meth:`from_frame` are all accepted); the record ids are kept, so every
        covariance is available.  For a file too large to hold row by row use
        :func:`pydial.read_comparisons`, which aggregates it chunk by chunk.

        Raises
        ------
        DataError
            The file cannot be read or lacks a column, or :meth:`from_frame` refuses it.
        MemoryLimitError
            The rows would not fit in the memory available.
        """
        cov = kwargs.get("covariates")
        unknown_keywords("Comparisons.from_parquet", kwargs, FRAME_KEYWORDS,
                         f"those of from_frame: {', '.join(sorted(FRAME_KEYWORDS))}")
        name_arguments(kwargs.get("items"), kwargs.get("self_preference"))  # before the file is read
        sides = covariate_sides(None if cov is None else covariate_names(cov))
        cols = list(column_names(kwargs.get("columns")).values()) + sides
        return cls.from_frame(read_parquet(path, cols, frame_bytes(1, len(sides) // 2)), **kwargs)

    @classmethod
    def _build(
        cls,
        canon: pd.DataFrame,
        items: tuple[str, ...],
        judges: tuple[str, ...],
        human_judge: str,
        dropped: tuple[str, ...] = (),
        records: tuple[np.ndarray, pd.Index] | None = None,
        covariates: tuple[pd.Series | None, str | None] = (None, None),
        self_preference: Mapping[str, tuple[str, ...]] | None = None,
    ) -> "Comparisons":
        """Aggregate the canonical rows ``canon`` of the ``judges`` and the human judge into cells.

        ``records`` (record codes of the rows of ``canon`` and the distinct record ids)
        saves factorizing the record ids again; ``covariates`` are the scales and transform of
        the covariate columns of ``canon`` (``cov:<name>``): each distinct covariate value
        of a ``(k, i, j, a)`` is a cell of its own.  ``self_preference``: the own items of the
        judges kept (:meth:`with_self_preference`; its column is among ``covariates``).
        """
        K = len(judges)
        jindex = {name: k for k, name in enumerate(judges)}
        jindex[human_judge] = K
        judge = canon["judge"].astype("category").cat
        k = np.asarray([jindex.get(str(x), -1) for x in judge.categories] + [-1], dtype=np.int32)[judge.codes.to_numpy()]
        keep = k >= 0
        if not keep.all():
            canon, k, records = canon.loc[keep], k[keep], None
        canon = canon.assign(k=k)
        canon.attrs["dropped_judges"] = dropped
        outcome = canon["outcome"].to_numpy()
        decisive = ~canon["self"].to_numpy(bool) & ((outcome == I_WINS) | (outcome == J_WINS))
        counted = "count" in canon.columns  # aggregated input: no record ids
        if not counted:
            rec_codes, rec_uniques = records if records is not None else pd.factorize(canon["record_id"], sort=False)
            canon["rec"] = rec_codes
        N = len(items)
        # One key (k, i, j, a[, z]) per row (exact at any size); the human judge (k = K, a = 0) sorts last.
        scale, transform = covariates
        zcols = [] if scale is None else [COVARIATE_PREFIX + c for c in scale.index]
        rc = RowCoder(canon[zcols].to_numpy(float)) if zcols else None
        keys = Keys((K + 1, N, N, 2, *(() if rc is None else (len(rc),))))
        key = keys.encode([k, canon["i"].to_numpy(), canon["j"].to_numpy(), canon["a"].to_numpy() > 0,
                           *(() if rc is None else (rc.codes,))])
        every = bool(decisive.all())
        won = outcome == I_WINS if every else outcome[decisive] == I_WINS
        cnt = None if not counted else canon["count"].to_numpy(float) if every else canon["count"].to_numpy(float)[decisive]
        if not every:
            key = key[decisive]
        uk, inv = group(key)
        del key
        n = np.bincount(inv, weights=cnt, minlength=uk.size).astype(float)
        y = np.bincount(inv, weights=won if cnt is None else won * cnt, minlength=uk.size).astype(float)
        ck, ci, cj, ca, *zc = keys.decode(uk)
        del uk
        n_llm = int(np.searchsorted(ck, K))
        z = None if rc is None else rc.table[zc[0]]

        # LLM cells keyed by (k, i, j, a[, z]), then human cells keyed by (i, j[, z]).
        llm = LLMCells(ck[:n_llm], ci[:n_llm], cj[:n_llm], np.where(ca[:n_llm] == 1, 1, -1), n[:n_llm], y[:n_llm],
                       z=None if z is None else z[:n_llm])
        human = HumanCells(ci[n_llm:], cj[n_llm:], n[n_llm:], y[n_llm:], z=None if z is None else z[n_llm:], judge=K)
        own = {k: tuple(v) for k, v in (self_preference or {}).items() if k in jindex and k != human_judge}  # judges kept
        extra: dict[str, Any] = {"covariate_scale": scale, "covariate_transform": transform, "self_preference": own or None}
        if counted:
            return cls(items, judges, human_judge, llm, human, None, (), canon, **extra)
        is_h = inv >= n_llm
        cell = inv  # index into the LLM or the human cells
        cell[is_h] -= n_llm
        take = None if every else np.flatnonzero(decisive)  # the decisive rows, LLM rows first, then human rows
        if is_h.any() and not is_h.all():
            order = np.concatenate([np.flatnonzero(~is_h), np.flatnonzero(is_h)])
            take, cell, won = order if take is None else take[order], cell[order], won[order]
        rec = np.asarray(rec_codes, dtype=np.int64)
        rows = Rows(rec if take is None else rec[take], (k if take is None else k[take]).astype(np.int64), cell,
                    won.astype(float))
        return cls(items, judges, human_judge, llm, human, rows, RecordIds(rec_uniques), canon, **extra)

    # -------------------------------------------------------------- properties
    @property
    def N(self) -> int:
        """Number of items."""
        return len(self.items)

    @property
    def K(self) -> int:
        """Number of LLM judges."""
        return len(self.judges)

    @property
    def covariates(self) -> tuple[str, ...]:
        """Names of the response covariates (empty without covariates)."""
        return () if self.covariate_scale is None else tuple(str(c) for c in self.covariate_scale.index)

    @property
    def p(self) -> int:
        """Number of response covariates."""
        return len(self.covariates)

    @property
    def _covariate_columns(self) -> list[str]:
        return [COVARIATE_PREFIX + c for c in self.covariates]

    @property
    def covariate_support(self) -> np.ndarray:
        """``(K + 1, p)`` bool: whether covariate ``t`` is nonzero on some decisive cell of judge ``k`` (row ``K``: the people).

        A group's covariate that is 0 on all its cells has no effect to estimate: its entry of
        ``beta`` is a fixed 0, not a parameter (:class:`~pydial.model.chart.Chart`'s ``fixed``;
        e.g. the people's and the unmapped judges' ``"self_preference"``).  Cached.
        """
        key = ("covariate support",)
        if key not in self._cache:
            out = np.zeros((self.K + 1, self.p), bool)
            for cells, g in ((self.llm, self.llm.judge), (self.human, np.full(len(self.human), self.K))):
                if cells.z is not None and len(cells):
                    for t in range(self.p):  # nonzero cells per group (bincount: linear, no ufunc.at)
                        out[:, t] |= np.bincount(g, weights=cells.z[:, t] != 0, minlength=self.K + 1) > 0
            self._cache[key] = out
        return self._cache[key]

    def effect_columns(self, z: np.ndarray | None, group: int | None) -> np.ndarray | None:
        """Return the columns of ``z`` (cells x ``p``) whose effects ``group`` has: a GLM design's covariate columns.

        ``group``: a judge index, ``K`` for the people, ``None`` for the LLM judges together
        (an effect shared by them).  The columns that are 0 on all the group's cells
        (:attr:`covariate_support`) are left out; ``z`` itself when none is, ``None`` when all are.
        """
        if z is None:
            return None
        sup = self.covariate_support
        keep = sup[:-1].any(axis=0) if group is None else sup[group]
        return z if keep.all() else (z[:, keep] if keep.any() else None)

    def with_self_preference(self, own: Mapping[str, Sequence[str]], *, strip_names: bool = True) -> "Comparisons":
        """Return the data with the self-preference covariate: a judge favouring its own model family's responses.

        Beyond the paper: one more response covariate, named ``"self_preference"`` and appended
        to :attr:`covariates`, built from each judge's own items ``own`` (e.g.
        ``{"gpt-4": ["gpt-4-0613", "gpt-4-turbo"]}``).  In the canonical orientation judge ``k``'s
        comparison of items ``i < j`` has ``z = 1[i own_k] - 1[j own_k]`` (so the term
        ``z beta_k`` of the judge's BTL model adds ``beta_k`` to the judge's own items' scores);
        it is 0 for the people and for the judges not in ``own``, whose entries of ``beta`` are
        fixed at 0 (:attr:`covariate_support`).  It is not standardized: its scale is 1
        (:attr:`covariate_scale`), so ``beta_k`` is the log-odds shift of an own item.

        Within a judge's pair the covariate is constant, ``z = D_k o_k`` with ``o_k`` the judge's
        own-item indicator: in the judge's own model (``method="judges"``) it is confounded
        with the judge's scores, and in the structured models it is identified through the
        low-rank structure only (:func:`pydial.model.identifiability.check_design`).

        The judge and item names of ``own`` are converted and cleaned as the data's names are
        (:mod:`pydial.data.names`; ``strip_names`` as the data were read): ``" gpt-4"`` and
        ``"gpt-4"`` name one judge.

        Raises
        ------
        DataError
            A judge of ``own`` that is not an LLM judge of the data (the people included), an
            unknown item, or no judgment of a mapped judge comparing an own item with another.
        ArgumentError
            The data have a self-preference covariate already.
        ArgumentTypeError
            ``own`` is not a mapping, or a judge's entry is neither a name nor a list of names (e.g. ``None``).
        """
        if SELF_PREFERENCE in self.covariates:
            raise ArgumentError(f"the data have the covariate {SELF_PREFERENCE!r} already")

        def text(x: Any, argument: str) -> str:
            return clean(argument_name(x, argument), strip_names)[0]

        mapped: dict[str, tuple[str, ...]] = {}
        for judge, given in own_items(own).items():
            key = text(judge, "a judge of self_preference")
            mapped[key] = tuple(dict.fromkeys(mapped.get(key, ()) + tuple(text(x, f"self_preference[{judge!r}]")
                                                                            for x in given)))
        unknown = sorted(k for k in mapped if k not in self.judges)
        if unknown:
            raise DataError(f"self_preference names judge(s) {unknown} that are not LLM judges of the data "
                            f"(people have no self-preference); known judges: {list(self.judges)}")
        index = {name: t for t, name in enumerate(self.items)}
        bad = sorted({x for v in mapped.values() for x in v if x not in index})
        if bad:
            raise DataError(f"self_preference names unknown item(s) {bad[:10]}; known items: {list(self.items)[:10]}"
                            + (" ..." if self.N > 10 else ""))
        O = np.zeros((self.K + 1, self.N))  # own-item indicators o_k, the people's row 0
        for k, v in mapped.items():
            O[self.judges.index(k), [index[x] for x in v]] = 1.0
        f = self.frame
        k, i, j = (f[c].to_numpy(np.int64) for c in ("k", "i", "j"))
        z = O[k, i] - O[k, j]
        if not np.any(z[(k < self.K) & ~f["self"].to_numpy(bool)] != 0):
            raise DataError(f"no judgment of the judge(s) {sorted(mapped)} compares an own item with another item: "
                            "the self-preference covariate is 0 everywhere")
        cols = ["record_id", "judge", "i", "j", "a", "outcome", "self", *self._covariate_columns]
        canon = f[cols + (["count"] if self.aggregated else [])].assign(**{COVARIATE_PREFIX + SELF_PREFERENCE: z})
        scale = pd.concat([self.covariate_scale, pd.Series({SELF_PREFERENCE: 1.0})]) if self.p else pd.Series(
            {SELF_PREFERENCE: 1.0})
        scale = scale.astype(float).rename("scale").rename_axis("covariate")
        out = Comparisons._build(canon, self.items, self.judges, self.human_judge, tuple(f.attrs.get("dropped_judges", ())),
                                 covariates=(scale, self.covariate_transform or "difference"), self_preference=mapped)
        out.frame.attrs.update({key: val for key, val in f.attrs.items() if key not in out.frame.attrs})
        return out

    @property
    def aggregated(self) -> bool:
        """Whether the data came as aggregated counts (no record ids, no per-row table)."""
        return self.rows is None

    def _require_rows(self, what: str) -> None:
        if self.aggregated:
            raise DataError(f"{what} needs the judgments row by row with their record ids, but these data were "
                            "built from aggregated counts (Comparisons.from_counts / read_comparisons)")

    @property
    def n_llm(self) -> int:
        """Number of decisive LLM judgments ``n_L``."""
        return int(self.llm.n.sum())

    @property
    def n_human(self) -> int:
        """Number of decisive human judgments ``n_H``."""
        return int(self.human.n.sum())

    def llm_cells(self) -> pd.DataFrame:
        """LLM cells as a labelled table: judge, item_i, item_j, a, n, y."""
        it = np.asarray(self.items, dtype=object)
        return pd.DataFrame(
            {
                "judge": np.asarray(self.judges, dtype=object)[self.llm.judge],
                "item_i": it[self.llm.i],
                "item_j": it[self.llm.j],
                "a": self.llm.a,
                "n": self.llm.n.astype(int),
                "y": self.llm.y.astype(int),
                **self._z_frame(self.llm),
            }
        )

    def _z_frame(self, cells: CellTable) -> dict[str, np.ndarray]:
        """Return the covariate columns ``z_<name>`` of the cells' labelled table."""
        return {} if cells.z is None else {f"z_{c}": cells.z[:, t] for t, c in enumerate(self.covariates)}

    def human_cells(self) -> pd.DataFrame:
        """Human cells as a labelled table: item_i, item_j, n, y."""
        it = np.asarray(self.items, dtype=object)
        return pd.DataFrame(
            {"item_i": it[self.human.i], "item_j": it[self.human.j],
             "n": self.human.n.astype(int), "y": self.human.y.astype(int), **self._z_frame(self.human)}
        )

    def cell_table(self, which: str = "llm", *, ties: bool = False) -> CellTable:
        """Return a :class:`CellTable` of the cells of both engines, with integer counts.

        Parameters
        ----------
        which : {"llm", "human", "pooled"}
            The LLM cells (judges ``0..K-1``), the human cells (judge ``K``, ``a = 0``), or
            the LLM cells all given to judge 0 (the pooled BTL).
        ties : bool
            ``False``: the decisive cells (:attr:`llm`, :attr:`human`); ``True``: the cells
            with tie counts of :meth:`tie_cells`.
        """
        if which not in ("llm", "human", "pooled"):
            raise ArgumentError(f"which must be 'llm', 'human' or 'pooled', got {which!r}")
        key = ("cell_table", which, bool(ties))
        if key not in self._cache:
            self._cache[key] = self._cell_table(which, ties)
        return self._cache[key]

    def _cell_table(self, which: str, ties: bool) -> CellTable:
        """:meth:`cell_table`, uncached."""
        if which == "pooled":
            return self.cell_table("llm", ties=ties).with_judge(0)
        if not ties:
            return self.human.integer().with_judge(self.K) if which == "human" else self.llm.integer()
        t = self._tie_frame()
        t = t[t["k"] == self.K] if which == "human" else t[t["k"] < self.K]
        z = t[self._covariate_columns].to_numpy(float) if self.p else None
        k, i, j, a, wi, wj, ti = (_int64(t[c]) for c in ("k", "i", "j", "a", "wins_i", "wins_j", "ties"))
        return CellTable.from_counts(k, i, j, a, wi, wj, ti, z)

    def tie_cells(self, *, human: bool = False) -> pd.DataFrame:
        """Cells with tie counts for the tie models (Davidson / Davidson-Beaver).

        Returns integer columns ``k, i, j, a, wins_i, wins_j, ties`` (``k = K`` and
        ``a = 0`` for the human judge, included only with ``human=True``), sorted by
        ``(k, i, j, a)``, and with covariates their columns ``cov:<name>`` (a cell per value).
        "Both bad" labels and self-comparisons are still excluded.
        A new frame per call, taken from one aggregation per data set.
        """
        t = self._tie_frame()
        return t.copy() if human else t.loc[t["k"] < self.K].reset_index(drop=True)

    def _tie_frame(self) -> pd.DataFrame:
        """Aggregate the cells with tie counts of every judge, people included (:meth:`tie_cells`), once."""
        key = ("tie_cells",)
        if key not in self._cache:
            f = self.frame
            m = (~f["self"]) & f["outcome"].isin([I_WINS, J_WINS, TIE])
            wt = f.loc[m, "count"] if self.aggregated else 1
            g = f.loc[m].assign(
                wins_i=lambda x: (x["outcome"] == I_WINS).astype(int) * wt,
                wins_j=lambda x: (x["outcome"] == J_WINS).astype(int) * wt,
                ties=lambda x: (x["outcome"] == TIE).astype(int) * wt,
            )
            out = g.groupby(["k", "i", "j", "a", *self._covariate_columns], as_index=False)[
                ["wins_i", "wins_j", "ties"]].sum()
            self._cache[key] = out.astype({c: int for c in ("k", "i", "j", "a", "wins_i", "wins_j", "ties")}
                                          ).reset_index(drop=True)
        return self._cache[key]

    # ----------------------------------------------------------------- report
    def summary(self) -> pd.DataFrame:
        """Count the statistics of the paper's Table "Dataset statistics", plus exclusions.

        Returns a one-column DataFrame (``value``) indexed by statistic.  Data read by
        :func:`pydial.read_judge_responses` add rows ``panel: ...``: what the read left out.
        """
        f = self.frame
        K, N = self.K, self.N
        wt = f["count"] if self.aggregated else pd.Series(1, index=f.index)  # judgments per row
        hum = f["k"] == K
        llm = ~hum
        hm = hum & ~f["self"]
        h_i = int(wt[hm & (f["outcome"] == I_WINS)].sum())
        h_j = int(wt[hm & (f["outcome"] == J_WINS)].sum())
        cells_kij = pd.Series(self.llm.n).groupby([self.llm.judge, self.llm.i, self.llm.j]).sum()
        other = ~f["self"].to_numpy(bool)
        pairs_obs = len(pd.unique(f["i"].to_numpy(np.int64)[other] * N + f["j"].to_numpy(np.int64)[other]))
        lm = llm & ~f["self"]
        l_tie = wt.where(lm & (f["outcome"] == TIE), 0)
        ties_by_judge = l_tie[lm].groupby(f.loc[lm, "k"]).sum() / wt[lm].groupby(f.loc[lm, "k"]).sum()
        rows: dict[str, Any] = {
            "records": f["record_id"].nunique() if not self.aggregated else "- (aggregated counts)",
            "items N": N,
            "LLM judges K": K,
            "observed pairs": pairs_obs,
            "possible pairs": N * (N - 1) // 2,
            "human labels decisive (i wins / j wins)": f"{h_i} / {h_j}",
            "human ties": int(wt[hm & (f["outcome"] == TIE)].sum()),
            "human both bad": int(wt[hm & (f["outcome"] == BOTH_BAD)].sum()),
            "decisive human labels n_H": self.n_human,
            "LLM judgments": int(wt[llm].sum()),
            "LLM ties": int(l_tie.sum()),
            "LLM both bad": int(wt[lm & (f["outcome"] == BOTH_BAD)].sum()),
            "self-comparisons excluded": int(wt[f["self"]].sum()),
            "tie-excluded n_LLM": self.n_llm,
            "display order +1 / -1": f"{int(self.llm.n[self.llm.a > 0].sum())} / {int(self.llm.n[self.llm.a < 0].sum())}",
            "cells observed (judge, pair)": int(cells_kij.size),
            "cells possible (judge, pair)": K * N * (N - 1) // 2,
            "n_kij per cell min / mean / max": (
                f"{cells_kij.min():.0f} / {cells_kij.mean():.1f} / {cells_kij.max():.0f}" if cells_kij.size else "-"
            ),
            "judge tie rate min-max": (
                f"{ties_by_judge.min():.3f}-{ties_by_judge.max():.3f}" if ties_by_judge.size else "-"
            ),
            NAMES_CHANGED: f.attrs.get("names_stripped", "none"),
            "duplicated rows (identical in all six columns)": "{} ({})".format(*f.attrs.get("duplicated_rows", (0, "kept"))),
            "judges dropped (no decisive judgment)": ", ".join(f.attrs.get("dropped_judges", ())) or "none",
        }
        if self.p:
            rows["covariates (transform; scale)"] = f"{self.covariate_transform}; " + ", ".join(
                f"{c} {v:.4g}" for c, v in self.covariate_scale.items())  # type: ignore[union-attr]
        rows.update(f.attrs.get("panel", {}))  # what pydial.read_judge_responses read and left out
        return pd.DataFrame({"value": pd.Series(rows, dtype=object)})

    def __repr__(self) -> str:
        """Show the numbers of items, judges, judgments, cells and records."""
        return (
            f"Comparisons(N={self.N} items, K={self.K} LLM judges, n_LLM={self.n_llm} in {len(self.llm)} cells, "
            f"n_H={self.n_human} in {len(self.human)} cells, {len(self.record_ids)} records)"
        )

    # ------------------------------------------------------------- subsetting
    def subset(
        self,
        *,
        records: Iterable[Any] | None = None,
        judges: Iterable[str] | None = None,
        drop_human: bool = False,
        drop_empty_judges: bool = False,
    ) -> "Comparisons":
        """Return a new :class:`Comparisons` restricted to some records and/or judges.

        Items keep their order, so scores stay comparable across subsets.  Unknown
        record ids or judges raise :class:`DataError`; so does an LLM judge left with
        no decisive judgment, unless ``drop_empty_judges=True`` (it is then removed and
        counted in :meth:`summary`), as in :meth:`from_frame`.
        """
        f = self.frame
        if records is not None:
            self._require_rows("subset(records=...)")
        m = np.ones(len(f), dtype=bool)
        if records is not None:
            wanted = pd.Index(list(records))
            missing = wanted.difference(pd.Index(self.record_ids))
            if len(missing):
                raise DataError(f"unknown record id(s) {list(missing[:5])} ({len(missing)} in all)")
            m &= f["record_id"].isin(wanted).to_numpy()
        keep = list(self.judges) if judges is None else [str(x) for x in judges]
        unknown = sorted(set(keep) - set(self.judges))
        if unknown:
            raise DataError(f"unknown judge(s) {unknown}; known: {list(self.judges)}")
        if drop_human:
            m &= (f["k"] < self.K).to_numpy()
        canon = f.loc[m, ["record_id", "judge", "i", "j", "a", "outcome", "self", *self._covariate_columns]
                      + (["count"] if self.aggregated else [])]
        decisive = canon.loc[(~canon["self"]) & canon["outcome"].isin([I_WINS, J_WINS]), "judge"]
        empty = [k for k in keep if k not in set(decisive)]
        dropped = tuple(f.attrs.get("dropped_judges", ()))
        if empty and not drop_empty_judges:
            raise DataError(f"judge(s) {empty} have no decisive judgment in this subset; "
                            "pass drop_empty_judges=True to remove them")
        if empty:
            keep = [k for k in keep if k not in empty]
            dropped += tuple(empty)
        return Comparisons._build(canon, self.items, tuple(keep), self.human_judge, dropped,
                                  covariates=(self.covariate_scale, self.covariate_transform),
                                  self_preference=self.self_preference)

    def split(self, frac: float = 0.7, *, seed: np.random.Generator | int | None = None
              ) -> tuple["Comparisons", "Comparisons"]:
        """Random split by record (all judgments of a record stay together).

        Returns ``(train, test)`` with about ``frac`` of the records in ``train``;
        ``seed`` (int, Generator or None) drives the permutation.
        """
        self._require_rows("split (by record)")
        if not 0.0 < frac < 1.0:
            raise ArgumentError(f"frac ({frac}) must be in the open interval (0, 1)")
        gen = np.random.default_rng(seed)
        ids = np.asarray(self.record_ids, dtype=object)
        take = gen.permutation(ids.size)[: int(round(frac * ids.size))]
        train_ids = set(ids[take].tolist())
        test_ids = [r for r in self.record_ids if r not in train_ids]
        return self.subset(records=train_ids), self.subset(records=test_ids)

    def to_frame(self) -> pd.DataFrame:
        """Return the validated rows in the long format (canonical item names).

        With covariates, the per-side columns ``<name>_a``, ``<name>_b`` are values that give
        each row's comparison covariate again: ``(x, 0)`` with ``x = z * scale`` for the
        ``"difference"`` transform, ``((1 + x) / 2, (1 - x) / 2)`` for ``"normalized"``, so that
        ``from_frame(data.to_frame(), covariates=data.covariates, covariate_transform=...)``
        gives the same data (not the original per-side values, which are not kept).  The
        self-preference covariate has no columns: it comes from the judges' own items, so
        ``from_frame(data.to_frame(), covariates=<the others>, self_preference=data.self_preference)``
        gives the same data.
        """
        self._require_rows("to_frame")
        f = self.frame
        it = np.asarray(self.items, dtype=object)
        winner = np.select([f["outcome"] == I_WINS, f["outcome"] == J_WINS, f["outcome"] == TIE], ["a", "b", "tie"], "both_bad")
        first = np.where(f["a"] > 0, "a", np.where(f["a"] < 0, "b", "a"))
        out = {"record_id": f["record_id"].to_numpy(), "judge": f["judge"].to_numpy(),
               "item_a": it[f["i"]], "item_b": it[f["j"]], "first": first, "winner": winner}
        for c in self.covariates:
            if c == SELF_PREFERENCE and self.self_preference is not None:
                continue  # from the own items (self_preference=), not from per-side columns
            x = f[COVARIATE_PREFIX + c].to_numpy(float) * float(self.covariate_scale[c])  # type: ignore[index]
            normalized = self.covariate_transform == "normalized"
            out[f"{c}_a"], out[f"{c}_b"] = ((1 + x) / 2, (1 - x) / 2) if normalized else (x, np.zeros_like(x))
        return pd.DataFrame(out)
