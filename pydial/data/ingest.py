"""One validation for every reader: columns to integer codes, checked on their distinct values.

Every input path hands its columns, whole or by chunks, to a :class:`Validator`: names follow :mod:`pydial.data.names`,
a container cell is refused in every column (:func:`encode`), a used column occurs once (:func:`check_columns`), a missing
cell is refused (except ``first`` on the human judge's rows), ``first`` is ``a``/``b`` and ``winner`` one of ``a, b, tie,
both_bad`` (case and surrounding whitespace ignored).  A chunk becomes a :class:`Coded` table; cells are keyed by :class:`Keys`.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from pydial.data.names import CONTAINER_CELLS, NameSpace, Spelling, argument_name, refusal, spelling
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError

FIRST_VALUES = ("a", "b")
WINNER_VALUES = ("a", "b", "tie", "both_bad")
COLUMNS = ("record_id", "judge", "item_a", "item_b", "first", "winner")
COLUMN_HINT = "Map other names with columns={'judge': 'annotator', 'item_a': 'model_a', ...}"
"""How the Python readers map column names (the command line says it with its options)."""

# Display-order codes of a Coded table (0: not used, the human judge's rows).
FIRST_NONE, FIRST_A, FIRST_B = 0, 1, 2
PROGRESS_MIN_ROWS = 2_000_000  # shorter reads take a second or two: no progress bar


def rows_text(index: Sequence[Any], limit: int = 8) -> str:
    """Format the rows ``index`` for an error message: the first ``limit`` labels and how many in all."""
    shown = ", ".join(str(x) for x in list(index)[:limit])
    return f"rows [{shown}{', ...' if len(index) > limit else ''}] ({len(index)} in all)"


def check_cells(s: pd.Series, column: str) -> None:
    """Refuse list, dict, set, tuple or array cells in the object column ``s`` (named ``column`` in the message)."""
    bad = s.map(lambda x: isinstance(x, CONTAINER_CELLS)).to_numpy(bool)
    if bad.any():
        kind = type(s[bad].iloc[0]).__name__
        raise DataError(f"column {column!r} holds {kind} cells at {rows_text(s.index[bad])}; "
                        "every cell must be a single value (a name, a record id, a/b, a winner label)")


def check_columns(found: Sequence[Any], wanted: Sequence[str], where: str) -> None:
    """Refuse a column of ``wanted`` that occurs more than once in ``found``, the columns of ``where``."""
    counts = pd.Series(list(found), dtype=object).value_counts()
    twice = [c for c in dict.fromkeys(wanted) if counts.get(c, 0) > 1]
    if twice:
        raise DataError(f"{where} has {len(twice)} column name(s) more than once: {twice}; every column must have "
                        "its own name (rename or delete the copies)")


def fail_rows(message: str, index: pd.Index, bad: np.ndarray, tail: str = "") -> None:
    """Raise :class:`DataError` with ``message`` naming the rows of ``index`` where ``bad`` (then ``tail``), if any."""
    if bad.any():
        raise DataError(f"{message} at {rows_text(index[np.flatnonzero(bad)])}{tail}")


# ------------------------------------------------------------ one column
def encode(values: Any, column: str, index: pd.Index) -> tuple[np.ndarray, list[Spelling | None]]:
    """Factorize one column (Series or pyarrow array) into per-row codes (``-1`` missing) and each value's spelling.

    A cell that is not text, UTF-8 bytes, a number or missing raises :class:`DataError` naming the column and rows.
    """
    if isinstance(values, pd.Series) and (isinstance(values.dtype, pd.ArrowDtype)
                                          or getattr(values.dtype, "storage", None) == "pyarrow"):
        import pyarrow as pa

        values = pa.array(values.array)  # the Arrow data the Series holds, not a copy
    if isinstance(values, pd.Series):
        s = values
        if isinstance(s.dtype, pd.CategoricalDtype):
            return _spelled(*_occurring(s.cat.codes.to_numpy(np.int64), list(s.cat.categories)), column, index)
        if s.dtype == object and infer_dtype(s, skipna=True).startswith("mixed"):
            # Python objects of several types: refuse containers, keep 4 and 4.0 apart (and 4 and True)
            check_cells(s, column)
            typed = pd.Series([(type(x), x) for x in s.tolist()], index=s.index, dtype=object)
            codes, uniq = pd.factorize(typed, use_na_sentinel=True)
            return _spelled(codes.astype(np.int64, copy=False), [x for _, x in uniq.tolist()], column, index)
        codes, uniq = pd.factorize(s, use_na_sentinel=True)
        return _spelled(codes.astype(np.int64, copy=False), uniq.tolist(), column, index)
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = arr.type.value_type if isinstance(arr, pa.DictionaryArray) else arr.type
    if pa.types.is_nested(kind):
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        raise DataError(f"column {column!r} holds {kind} cells at {rows_text(index[valid])}; every cell must be a "
                        "single value (a name, a record id, a/b, a winner label), not a list or a struct")
    encoded = isinstance(arr, pa.DictionaryArray)  # as read (Parquet), its dictionary may hold more values
    if not encoded:
        arr = pc.dictionary_encode(arr)
    codes = pc.fill_null(arr.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    found = arr.dictionary.to_pylist()
    if encoded:
        codes, found = _occurring(codes, found)
    return _spelled(codes, found, column, index)


def _occurring(codes: np.ndarray, values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes and the ``values`` (categories, a dictionary) that occur in ``codes``."""
    used = np.bincount(codes + 1, minlength=len(values) + 1)[1:] > 0
    if used.all():
        return codes, values
    new = np.append(np.cumsum(used) - 1, -1)  # code -1 (missing) -> the last entry
    return new[codes], [x for x, u in zip(values, used) if u]


def _spelled(codes: np.ndarray, values: list[Any], column: str, index: pd.Index
             ) -> tuple[np.ndarray, list[Spelling | None]]:
    """``codes`` and the spellings of the distinct ``values``; a refused value raises, naming its rows."""
    for k, x in enumerate(values):
        why = refusal(x)
        if why is not None:
            raise DataError(f"column {column!r} holds {why} at {rows_text(index[codes == k])}; a name or a label "
                            "must be text (or UTF-8 bytes) or a number")
    return codes, [spelling(x) for x in values]


def blank_text(values: pd.Series | pd.Index) -> np.ndarray:
    """Return the mask of whitespace-only text values (blank: missing in text files and in every reader's record ids)."""
    s = values.to_series(index=None) if isinstance(values, pd.Index) else values
    if not (pd.api.types.is_string_dtype(s.dtype) or isinstance(s.dtype, pd.CategoricalDtype)):
        return np.zeros(len(s), bool)
    try:
        stripped = s.str.strip()
    except AttributeError:  # no text among the values (e.g. object dtype holding numbers)
        return np.zeros(len(s), bool)
    return stripped.eq("").to_numpy(dtype=bool, na_value=False)


def missing_records(values: Any, column: str, index: pd.Index) -> None:
    """Refuse missing record ids of one pyarrow chunk: null, NaN or blank text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if isinstance(arr, pa.DictionaryArray):
        arr = arr.dictionary_decode()
    if pa.types.is_nested(arr.type):
        encode(arr, column, index)  # raises, naming the rows
    bad = pc.is_null(arr, nan_is_null=True)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        bad = pc.or_(bad, pc.fill_null(pc.equal(pc.utf8_trim_whitespace(arr), ""), False))
    fail_rows(f"missing values in column {column!r}", index, np.asarray(bad.to_numpy(zero_copy_only=False), bool))


@dataclass
class Coded:
    """Validated judgments as small integers, one row per judgment or per key with its ``count`` (``None``: one).

    ``first``: ``FIRST_*`` codes; ``winner``: index into ``WINNER_VALUES``; ``spelled``: ``first`` and ``winner`` as written.
    """

    judge: np.ndarray
    item_a: np.ndarray
    item_b: np.ndarray
    first: np.ndarray
    winner: np.ndarray
    count: np.ndarray | None = None
    spelled: np.ndarray | None = None
    z: np.ndarray | None = None
    """Per row, the comparison covariates as read (side ``item_a`` minus side ``item_b``, not standardized)."""

    def __len__(self) -> int:
        """Return the number of rows."""
        return int(self.judge.size)

    def select(self, mask: np.ndarray) -> "Coded":
        """Return the rows where ``mask`` is true."""
        return Coded(*(x[mask] for x in (self.judge, self.item_a, self.item_b, self.first, self.winner)),
                     *(None if x is None else x[mask] for x in (self.count, self.spelled, self.z)))


def check_chunksize(chunksize: Any) -> int:
    """Return ``chunksize`` as a positive ``int``; anything else is an :class:`~pydial.ArgumentError` naming it."""
    if isinstance(chunksize, (bool, np.bool_)) or not isinstance(chunksize, (int, np.integer)):
        raise ArgumentTypeError(f"chunksize must be a positive integer (rows per chunk), got "
                                f"{type(chunksize).__name__} {chunksize!r}")
    if chunksize < 1:
        raise ArgumentError(f"chunksize must be a positive integer (rows per chunk), got {chunksize}")
    return int(chunksize)


class Validator:
    """The rules of every reader, chunk by chunk (``columns``: pydial's names to the user's; ``blank_is_missing``: text).

    ``human_judge`` is converted and cleaned as the names are (a non-name is an :class:`~pydial.ArgumentError`).
    """

    def __init__(self, columns: dict[str, str], human_judge: Any, *, strip: bool = True, allow_similar: bool = False,
                 blank_is_missing: bool = False) -> None:
        self.columns = columns
        self.human_judge = argument_name(human_judge, "human_judge", strip)
        self.blank_is_missing = blank_is_missing
        self.allow_similar = allow_similar
        self.judges = NameSpace("judge", strip=strip)
        self.items = NameSpace("item", strip=strip)

    def _names(self, space: NameSpace, col: str, values: Any, index: pd.Index) -> np.ndarray:
        """Name ids of column ``col`` (missing or blank names raise, naming the rows)."""
        codes, spelled = encode(values, self.columns[col], index)
        ids, blank = space.add(spelled, f"column {self.columns[col]!r}")
        if self.blank_is_missing:
            blank = np.zeros_like(blank)  # ids < 0 then counts it missing
        missing = np.append((ids < 0) & ~blank, True)  # code -1 -> the last entry
        fail_rows(f"missing values in column {self.columns[col]!r}", index, missing[codes])
        fail_rows(f"empty {col.replace('_', ' ')} name in column {self.columns[col]!r}", index,
                  np.append(blank, False)[codes])
        return np.append(ids, -1).astype(np.int32)[codes]

    def _labels(self, col: str, values: Any, allowed: tuple[str, ...], index: pd.Index,
                skip: np.ndarray | None, missing: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """Return a ``first``/``winner`` column's codes (1-based in ``allowed``, 0 at ``skip``); codes as written; their count."""
        codes, spelled = encode(values, self.columns[col], index)
        texts = [None if s is None or (self.blank_is_missing and not s[0].strip()) else s[0] for s in spelled]
        position = {v: k + 1 for k, v in enumerate(allowed)}
        lut = np.array([0 if t is None else position.get(t.strip().lower(), -1) for t in texts] + [0], dtype=np.int8)
        out = lut[codes]
        if skip is not None:
            out[skip] = 0
        fail_rows(missing or f"missing values in column {self.columns[col]!r}", index,
                  out == 0 if skip is None else (out == 0) & ~skip)
        bad = out < 0
        if bad.any():
            vals = sorted({texts[c] or "" for c in np.unique(codes[bad])})[:5]
            what = "display-order" if col == "first" else "winner"
            fail_rows(f"unknown {what} value(s) {vals} in column {self.columns[col]!r}", index, bad,
                      f"; allowed: {list(allowed)}")
        return out, codes, len(spelled)

    def _no_human_rows(self) -> str:
        """Start of the missing-``first`` message when no row has the human judge: likely a misnamed one."""
        found = self.judges.texts
        shown = ", ".join(map(repr, found[:10])) + (f", ... ({len(found)} in all)" if len(found) > 10 else "")
        return (f"no rows have judge {self.human_judge!r}, the human judge (human_judge= / --human), whose rows alone "
                f"may leave {self.columns['first']!r} empty; the judges found are {shown}. Missing values in column "
                f"{self.columns['first']!r}")

    def chunk(self, table: dict[str, Any], index: pd.Index, *, with_winner: bool = True,
              spelled: bool = False) -> Coded:
        """Validate one chunk into a :class:`Coded` table (winners 0 without ``with_winner``; ``spelled``: codes as written)."""
        judge = self._names(self.judges, "judge", table["judge"], index)
        a = self._names(self.items, "item_a", table["item_a"], index)
        b = self._names(self.items, "item_b", table["item_b"], index)
        human = self.judges.ids.get(self.human_judge, -2)
        is_human = judge == human
        first, fcodes, _ = self._labels("first", table["first"], FIRST_VALUES, index, is_human,
                                        None if human >= 0 else self._no_human_rows())
        if not with_winner:
            return Coded(judge, a, b, first, np.zeros(judge.size, np.int8))
        winner, wcodes, nw = self._labels("winner", table["winner"], WINNER_VALUES, index, None)
        winner -= 1
        return Coded(judge, a, b, first, winner, spelled=(fcodes + 1) * (nw + 1) + wcodes + 1 if spelled else None)

    def finish(self, items: Sequence[Any] | None) -> None:
        """Check the names of all chunks for similar spellings (with ``human_judge`` and ``items=``)."""
        self.judges.check(self.allow_similar, [(self.human_judge, "human_judge=")])
        self.items.check(self.allow_similar, [(x, "items=") for x in (items or ())])


# -------------------------------------------------------------- keys
KEY_BITS = 62
"""Mixed-radix keys stay below ``2**KEY_BITS`` (:class:`Keys`)."""


class Keys:
    """Exact ``int64`` keys of rows of integer columns (``0 <= c_t < sizes[t]``), in lexicographic order.

    Mixed radix below :data:`KEY_BITS` bits; beyond, the partial key is replaced by its rank; :meth:`decode` inverts.
    """

    def __init__(self, sizes: Sequence[int]) -> None:
        self.sizes = [max(int(x), 1) for x in sizes]
        self.ranked: dict[int, np.ndarray] = {}
        """Column ``t`` -> the distinct partial keys of the columns before it (sorted), where they were ranked."""

    def encode(self, columns: Sequence[np.ndarray]) -> np.ndarray:
        """Return the key of each row of ``columns`` (one array per column, in the order of ``sizes``)."""
        self.ranked = {}
        key = np.array(columns[0], dtype=np.int64)  # a copy, updated in place
        span = self.sizes[0]
        for t in range(1, len(self.sizes)):
            if span * self.sizes[t] >= 2**KEY_BITS:  # Python integers: no overflow in the test
                codes, uniq = pd.factorize(key, sort=True)
                self.ranked[t] = np.asarray(uniq, np.int64)
                key = codes.astype(np.int64, copy=False)
                span = max(len(uniq), 1)
            key *= self.sizes[t]
            key += columns[t]
            span *= self.sizes[t]
        return key

    def decode(self, key: np.ndarray) -> list[np.ndarray]:
        """Return the columns of keys of :meth:`encode` (``int64`` arrays)."""
        key = np.array(key, np.int64)  # a copy, divided in place
        out = []
        for t in range(len(self.sizes) - 1, 0, -1):
            rest = np.empty_like(key)
            np.divmod(key, self.sizes[t], out=(key, rest))
            out.append(rest)
            if t in self.ranked:
                key = self.ranked[t][key]
        return [key, *out[::-1]]


def pack(columns: Sequence[np.ndarray], sizes: Sequence[int], *, invertible: bool = False) -> np.ndarray:
    """Return one int64 key per row of ``columns`` by :class:`Keys` (``invertible``: :class:`DataError` if ranked)."""
    keys = Keys(sizes)
    key = keys.encode(columns)
    if invertible and keys.ranked:
        raise DataError(f"too many distinct names to count: keys of sizes {list(sizes)} exceed {KEY_BITS} bits")
    return key


def unpack(key: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Return the columns of a key of :func:`pack` (``invertible``)."""
    return Keys(sizes).decode(key)


def duplicated(key: np.ndarray) -> np.ndarray:
    """Whether each row's ``key`` occurred in an earlier row (``pandas.Series.duplicated(keep="first")``)."""
    return pd.Series(key, copy=False).duplicated(keep="first").to_numpy()


BITMAP_SPAN = 64
"""Range of the keys per key up to which :func:`group` ranks them in a bitmap of the range."""
_POPCOUNT = np.array([bin(v).count("1") for v in range(256)], np.uint8)


def group(key: np.ndarray, *, sort: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Return ``np.unique(key, return_inverse=True)`` (unsorted without ``sort``): by runs, a table, a bitmap or hashing."""
    if key.size > 1 and bool(np.all(key[1:] >= key[:-1])):  # sorted (Comparisons.from_coded's rows): runs of equal keys
        new = np.empty(key.size, bool)
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        return key[new], np.cumsum(new) - 1
    span = int(key.max()) + 1 if key.size else 0
    table = key.size and key.min() >= 0 and key.size < 2**31
    if table and span <= max(8 * key.size, 1 << 26):
        present = np.zeros(span, bool)
        present[key] = True
        uniq = np.flatnonzero(present)
        del present
        rank = np.empty(span, np.int32)  # written (and paged in) only where a key occurs
        rank[uniq] = np.arange(uniq.size, dtype=np.int32)
        return uniq, rank[key].astype(np.int64)
    if table and span <= BITMAP_SPAN * key.size:
        return _bitmap_rank(key, span)
    codes, uniq = pd.factorize(key, sort=False)
    if not sort:
        return np.asarray(uniq), codes
    order = np.argsort(uniq, kind="stable")
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    return np.asarray(uniq)[order], rank[codes]


def _bitmap_rank(key: np.ndarray, span: int, block: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """Sorted :func:`group` of keys below ``span``: each key's rank is the count of set bits below it in a bitmap of the range."""
    present = np.zeros(-(-span // 64) * 64, bool)
    present[key] = True
    uniq = np.flatnonzero(present)
    words = np.packbits(present, bitorder="little").view("<u8")
    del present
    counts = _POPCOUNT[words.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.int64)
    before = np.cumsum(counts) - counts
    del counts
    inv = np.empty(key.size, np.int64)
    one = np.uint64(1)
    for s in range(0, key.size, block):
        k = key[s : s + block]
        w = k >> 6
        below = words[w] & ((one << (k & 63).astype(np.uint64)) - one)
        inv[s : s + block] = before[w] + _POPCOUNT[below.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.int64)
    return uniq, inv


def aggregate(coded: Coded, n_judges: int, n_items: int) -> Coded:
    """Sum the counts of equal judgments (pairs first put in name-id order, so both orientations share a key)."""
    flip = coded.item_a > coded.item_b
    lo, hi = np.minimum(coded.item_a, coded.item_b).astype(np.int64), np.maximum(coded.item_a, coded.item_b).astype(np.int64)
    first = np.where((coded.first == FIRST_NONE) | ~flip, coded.first, FIRST_A + FIRST_B - coded.first)
    winner = np.where((coded.winner < 2) & flip, 1 - coded.winner, coded.winner)  # a <-> b
    z = None if coded.z is None else np.where(flip[:, None], -coded.z, coded.z)
    rc = None if z is None else RowCoder(z)
    keys = Keys((n_judges, n_items * (n_items + 1) // 2, 3, len(WINNER_VALUES), *(() if rc is None else (len(rc),))))
    key = keys.encode([coded.judge, hi * (hi + 1) // 2 + lo, first, winner, *(() if rc is None else (rc.codes,))])
    uk, inv = group(key, sort=False)
    count = np.bincount(inv, weights=coded.count, minlength=uk.size)
    j, pair, f, w, *zc = keys.decode(uk)
    zu = None if rc is None else rc.table[zc[0]]
    b, a = triangle(pair)
    return Coded(j, a, b, f.astype(np.int8), w.astype(np.int8), count.astype(np.int64), z=zu)


class RowCoder:
    """Codes of the distinct rows of a float table ``z`` (:attr:`table`), column by column so no key overflows."""

    def __init__(self, z: np.ndarray) -> None:
        z = np.asarray(z, float)
        self._stages: list[tuple[pd.Index, pd.Index]] = []
        c = np.zeros(z.shape[0], np.int64)
        for t in range(z.shape[1]):
            col, values = pd.factorize(z[:, t])
            c, keys = pd.factorize(c * len(values) + col)
            self._stages.append((pd.Index(values), pd.Index(keys)))
        self.codes = np.asarray(c, np.int64)
        self.table = np.empty((len(self._stages[-1][1]) if self._stages else 0, z.shape[1]))
        self.table[self.codes] = z

    def __len__(self) -> int:
        """Return the number of distinct rows (at least 1, the multiplier of a key)."""
        return max(self.table.shape[0], 1)

    def code(self, z: np.ndarray) -> np.ndarray:
        """Return the codes of the rows ``z`` (their values must occur in the table)."""
        c = np.zeros(np.shape(z)[0], np.int64)
        for t, (values, keys) in enumerate(self._stages):
            c = keys.get_indexer(c * len(values) + values.get_indexer(z[:, t]))
        return np.asarray(c, np.int64)


TRIANGLE_TABLE = 1 << 23
"""Largest pair index whose row :func:`triangle` reads from a table (up to about 4,000 items)."""


def triangle(pair: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(j, i)`` with ``i <= j`` of the triangular pair index ``pair = j (j + 1) / 2 + i``."""
    top = int(pair.max()) + 1 if pair.size else 0
    if top <= TRIANGLE_TABLE:  # the row of every pair index, looked up (a few MB, cache-resident)
        rows = int((np.sqrt(8.0 * top + 1) - 1) // 2) + 2
        j = np.repeat(np.arange(rows, dtype=np.int32), np.arange(1, rows + 1))[pair].astype(np.int64)
    else:
        j = ((np.sqrt(8.0 * pair + 1) - 1) // 2).astype(np.int64)
        j -= j * (j + 1) // 2 > pair  # exact whatever the rounding of the square root
        j += (j + 1) * (j + 2) // 2 <= pair
    return j, pair - j * (j + 1) // 2


def pair_index(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    """Return the index of the pairs ``i <= j`` of ``n`` items in the order of ``(i, j)``: ``T - t(n - 1 - i, n - 1 - j)``.

    ``t(j', i') = j' (j' + 1) / 2 + i'`` is :func:`triangle`'s index, ordered by ``j'`` then ``i'``, and ``T`` the largest.
    """
    return n * (n + 1) // 2 - 1 - ((n - 1 - i) * (n - i) // 2 + (n - 1 - j))


def pair_items(pair: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(i, j)`` of :func:`pair_index`."""
    jr, ir = triangle(n * (n + 1) // 2 - 1 - pair)
    return n - 1 - jr, n - 1 - ir


def concat(parts: list[Coded]) -> Coded:
    """Stack :class:`Coded` tables and empty the list, so that the stack holds the only copy of the rows."""
    cnt = None if all(p.count is None for p in parts) else (  # None: rows as read, one judgment each
        np.concatenate([np.ones(len(p), np.int64) if p.count is None else p.count for p in parts]))
    zs = None if any(p.z is None for p in parts) else np.concatenate([p.z for p in parts if p.z is not None])
    judge, a, b, first, winner = (np.concatenate([getattr(p, f) for p in parts])
                                  for f in ("judge", "item_a", "item_b", "first", "winner"))
    out = Coded(judge, a, b, first, winner, cnt, z=zs)
    parts.clear()
    return out


# ------------------------------------------------------- progress
@contextmanager
def progress(rows: int | None, desc: str, *, estimate: int = 0) -> Iterator[Callable[[int], Any]]:
    """Yield a function advancing a ``tqdm`` bar of ``rows`` rows, shown on a terminal from ``PROGRESS_MIN_ROWS`` rows."""
    if (rows if rows is not None else estimate) < PROGRESS_MIN_ROWS or not sys.stderr.isatty():
        yield lambda n: None
        return
    from tqdm import tqdm

    with tqdm(total=rows, desc=desc, unit="rows", unit_scale=True, leave=False) as bar:
        yield bar.update
