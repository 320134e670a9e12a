"""Aggregated input: pre-aggregated counts and chunked reading of big files.

The binomial models of the paper (eq. binomial-model-llm, eq. binomial-model-human)
depend on the judgments only through the cell counts ``(k, i, j, a, n, y)``, so
large logs can be aggregated where they live (a data warehouse, Dask, Spark) and
fitted here from the counts:

* :func:`comparisons_from_counts` (also :meth:`pydial.Comparisons.from_counts`) takes
  one row per ``(judge, item_a, item_b, first)`` with the counts ``wins_a, wins_b,
  ties`` (and optionally ``both_bad``);
* :func:`read_comparisons` streams a long-format file (CSV, gzip CSV or Parquet) in
  chunks and aggregates each chunk to counts, so the raw frame is never in memory.

Aggregated data carry no record ids: the record-clustered covariance
(``cov="record"``, eq. hac-meat with the record kernel) is refused with
:class:`~pydial.DataError`; the Fisher, binomial and judge-pair cell meats need only
the cell counts and are identical to those computed from the rows.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from .data import BOTH_BAD, COLUMNS, FIRST_VALUES, I_WINS, J_WINS, TIE, WINNER_VALUES, Comparisons, rows_text, item_order
from .exceptions import DataError
from .names import NameReport, names_as_text

COUNT_COLUMNS: tuple[str, ...] = ("judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties")
"""Required columns of :func:`comparisons_from_counts` (``both_bad`` is optional)."""

_COUNTS = ("wins_a", "wins_b", "ties", "both_bad")
_KEY = ["judge", "item_a", "item_b", "first"]


def comparisons_from_counts(df: pd.DataFrame, *, human_judge: str = "human", items: Sequence[str] | None = None,
                            drop_empty_judges: bool = False, allow_similar_names: bool = False) -> Comparisons:
    """Validate pre-aggregated counts and build :class:`~pydial.Comparisons`.

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
    drop_empty_judges, allow_similar_names : bool, default False
        As in :meth:`~pydial.Comparisons.from_frame` (names are stripped of surrounding
        whitespace; two names differing only by case or whitespace are refused).

    Raises
    ------
    DataError
        Missing columns, missing or blank names, an unknown ``first`` on an LLM row,
        or counts that are not non-negative integers (the rows are named).
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in COUNT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"missing column(s) {missing} for aggregated counts; the table has columns {list(df.columns)} "
                        f"(need {list(COUNT_COLUMNS)}, optional 'both_bad')")
    t = pd.DataFrame(index=df.index)
    for c in ("judge", "item_a", "item_b"):  # validated and stored on the distinct names (categorical)
        codes, uniq = pd.factorize(df[c])
        na = codes < 0
        if na.any():
            raise DataError(f"missing values in column {c!r} at {rows_text(t.index[na])}")
        t[c] = _categorical(codes, [str(x).strip() for x in uniq])
        blank = (t[c] == "").to_numpy()
        if blank.any():
            raise DataError(f"empty {c.replace('_', ' ')} name in column {c!r} at {rows_text(t.index[blank])}")
    is_human = (t["judge"] == human_judge).to_numpy()
    codes, uniq = pd.factorize(df["first"])
    low = np.asarray([str(x).strip().lower() for x in uniq] + [""], dtype=object)
    first = low[codes]  # code -1 (missing) -> ""
    bad = ~np.isin(first, FIRST_VALUES) & ~is_human
    if bad.any():
        vals = sorted({str(x) for x in first[bad]})[:5]
        raise DataError(f"unknown display-order value(s) {vals} in column 'first' at {rows_text(t.index[bad])}; "
                        f"allowed on LLM rows: {list(FIRST_VALUES)}")
    t["first"] = pd.Categorical(np.where(is_human, "", first), categories=["", *FIRST_VALUES])
    for c in _COUNTS:
        if c not in df.columns:
            t[c] = 0
            continue
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        badc = ~np.isfinite(v) | (v < 0) | (v != np.round(v))
        if badc.any():
            raise DataError(f"column {c!r} must hold non-negative integer counts; bad values at {rows_text(t.index[badc])}")
        t[c] = v.astype(np.int64)
    g = t.groupby(_KEY, sort=False, as_index=False, observed=True)[list(_COUNTS)].sum()
    return _from_count_table(g, human_judge=human_judge, items=items, drop_empty_judges=drop_empty_judges,
                             allow_similar_names=allow_similar_names)


def _categorical(codes: np.ndarray, names: list[str]) -> pd.Categorical:
    """Codes into ``names`` (which may repeat after stripping) as a categorical of distinct names."""
    uniq, inv = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
    return pd.Categorical.from_codes(inv[codes], categories=uniq)


def _index_of(col: pd.Series, index: dict[str, int]) -> np.ndarray:
    """Item index of every row of a categorical (or text) column."""
    cat = col.astype("category").cat.remove_unused_categories().cat
    return np.asarray([index[str(x)] for x in cat.categories], dtype=np.int64)[cat.codes.to_numpy()]


def _from_count_table(g: pd.DataFrame, *, human_judge: str, items: Sequence[str] | None,
                      drop_empty_judges: bool, allow_similar_names: bool = False) -> Comparisons:
    """Canonical coding of a validated, key-unique count table (one row per key).

    Two names differing only by case or whitespace are refused as in :meth:`Comparisons.from_frame`
    (:func:`pydial.names.names_as_text`) unless ``allow_similar_names``.
    """
    report = NameReport()
    for kind, cols, extra in (("judge", ("judge",), [(human_judge, "human_judge=")]),
                              ("item", ("item_a", "item_b"), [(x, "items=") for x in (items or ())])):
        distinct = {c: pd.Series(g[c].astype("category").cat.remove_unused_categories().cat.categories.astype(str),
                                 dtype=object) for c in cols}
        names_as_text(distinct, kind, strip=False, allow_similar=allow_similar_names, report=report, extra=extra)
    seen = {str(x) for c in ("item_a", "item_b")
            for x in g[c].astype("category").cat.remove_unused_categories().cat.categories}
    names, index = item_order(seen, items)
    ia = _index_of(g["item_a"], index)
    ib = _index_of(g["item_b"], index)
    swap = ia > ib
    i, j = np.where(swap, ib, ia), np.where(swap, ia, ib)
    is_human = (g["judge"] == human_judge).to_numpy()
    a_first = (g["first"] == "a").to_numpy()
    judge = g["judge"].astype(object).to_numpy()
    a = np.where(np.where(swap, ~a_first, a_first), 1, -1)
    a[is_human] = 0
    parts = []
    for col, out_i, out_swapped in (("wins_a", I_WINS, J_WINS), ("wins_b", J_WINS, I_WINS),
                                    ("ties", TIE, TIE), ("both_bad", BOTH_BAD, BOTH_BAD)):
        c = g[col].to_numpy(np.int64)
        m = c > 0
        parts.append(pd.DataFrame({
            "record_id": None, "judge": judge[m], "i": i[m], "j": j[m], "a": a[m],
            "outcome": np.where(swap[m], out_swapped, out_i), "self": (ia == ib)[m], "count": c[m],
            "_human": is_human[m],
        }))
    canon = pd.concat(parts, ignore_index=True)
    if len(canon) == 0:
        raise DataError("the count table holds no judgment (all counts are 0)")
    h = canon.pop("_human").to_numpy()
    return Comparisons._finish(canon, h, names, human_judge, drop_empty_judges)


# --------------------------------------------------------------- chunked read
def _chunks(path: Path, columns: list[str], chunksize: int) -> Iterator[pd.DataFrame]:
    """Long-format chunks with every column as text (identifiers exactly as written)."""
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=chunksize, columns=columns):
            yield batch.to_pandas().astype(str)
        return
    reader = pd.read_csv(path, usecols=columns, dtype=str, keep_default_na=False, chunksize=chunksize,
                         compression="infer")
    with reader:
        yield from reader


def read_comparisons(path: str | PathLike[str], *, human_judge: str = "human", items: Sequence[str] | None = None,
                     chunksize: int = 500_000, drop_empty_judges: bool = False, judge: str = "judge",
                     item_a: str = "item_a", item_b: str = "item_b", first: str = "first",
                     winner: str = "winner") -> Comparisons:
    """Stream a long-format file into cell counts, chunk by chunk.

    Reads CSV (``.csv``), gzip CSV (``.csv.gz``) or Parquet (``.parquet``, through
    pyarrow) ``chunksize`` rows at a time, validates each chunk (on its distinct
    values) and keeps only its counts per ``(judge, item_a, item_b, first,
    winner)``; memory is that of one chunk plus the counts, not the whole table.
    Identifier columns are read as text exactly as written (names are stripped of
    surrounding whitespace).  The record ids are not kept: the result is aggregated
    data as from :meth:`~pydial.Comparisons.from_counts` (``cov="record"`` needs
    :meth:`~pydial.Comparisons.from_frame` / ``from_csv``).

    Raises
    ------
    DataError
        Unreadable file, missing columns, blank names, unknown ``first`` (LLM rows)
        or ``winner`` values, naming the offending rows (0-based data-row numbers).
    """
    path = Path(path)
    mapping = dict(zip(COLUMNS[1:], (judge, item_a, item_b, first, winner)))
    cols = list(mapping.values())
    acc: list[pd.DataFrame] = []
    registry: dict[str, int] = {}
    offset = 0
    try:
        for ch in _chunks(path, cols, chunksize):
            ch = ch[cols].set_axis(list(mapping), axis=1)
            ch.index = pd.RangeIndex(offset, offset + len(ch))
            offset += len(ch)
            acc.append(_chunk_counts(ch, human_judge, mapping, registry))
            if len(acc) > 8:  # keep the running counts compact
                acc = [_sum_counts(acc)]
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(f"cannot read {path!s}: {e}") from e
    if not acc:
        raise DataError(f"{path!s} has no rows")
    g = _sum_counts(acc)
    R = max(len(registry), 1)
    kj, ka, kb, kf = (g[c].to_numpy(np.int64) for c in _KEY)
    uk, codes = np.unique(((kj * R + ka) * R + kb) * 3 + kf, return_inverse=True)  # one integer key per row
    wide = pd.DataFrame(index=pd.RangeIndex(uk.size))
    names = np.asarray(sorted(registry, key=registry.__getitem__), dtype=object)
    rest = uk // 3
    wide["judge"] = pd.Categorical.from_codes(rest // (R * R), categories=names)
    wide["item_a"] = pd.Categorical.from_codes((rest // R) % R, categories=names)
    wide["item_b"] = pd.Categorical.from_codes(rest % R, categories=names)
    wide["first"] = pd.Categorical.from_codes(uk % 3, categories=["", *FIRST_VALUES])
    for w, col in enumerate(_COUNTS):  # winner codes follow WINNER_VALUES: a, b, tie, both_bad
        m = (g["winner"] == w).to_numpy()
        wide[col] = np.bincount(codes[m], weights=g["count"].to_numpy()[m], minlength=uk.size).astype(np.int64)
    return _from_count_table(wide, human_judge=human_judge, items=items, drop_empty_judges=drop_empty_judges)


def _chunk_counts(ch: pd.DataFrame, human_judge: str, mapping: dict[str, str], registry: dict[str, int]) -> pd.DataFrame:
    """Validate one chunk and count it per ``(judge, item_a, item_b, first, winner)``.

    The names are replaced by integer codes of ``registry`` (shared by all chunks) to keep
    the counts small.
    """
    for c in ("judge", "item_a", "item_b"):
        ch[c] = ch[c].str.strip()
        blank = (ch[c] == "").to_numpy()
        if blank.any():
            raise DataError(f"empty or missing {c.replace('_', ' ')} name in column {mapping[c]!r} at "
                            f"{rows_text(ch.index[blank])}")
    is_human = (ch["judge"] == human_judge).to_numpy()
    for c, allowed in (("winner", WINNER_VALUES), ("first", FIRST_VALUES)):
        codes, uniq = pd.factorize(ch[c])
        low = np.asarray([str(x).strip().lower() for x in uniq], dtype=object)
        ok_u = np.isin(low, allowed)
        bad = ~ok_u[codes] if codes.size else np.zeros(0, bool)
        if c == "first":
            bad &= ~is_human
            low = np.where(ok_u, low, "")
        if bad.any():
            vals = sorted({str(x) for x in ch[c].to_numpy()[bad]})[:5]
            raise DataError(f"unknown {c} value(s) {vals} in column {mapping[c]!r} at {rows_text(ch.index[bad])}; "
                            f"allowed: {list(allowed)}")
        ch[c] = low[codes]
    ch.loc[is_human, "first"] = ""
    for c in ("judge", "item_a", "item_b"):  # integer codes of a registry shared by the chunks
        codes, uniq = pd.factorize(ch[c])
        ids = np.asarray([registry.setdefault(str(x), len(registry)) for x in uniq], dtype=np.int64)
        ch[c] = ids[codes]
    for c, vals in (("first", ["", *FIRST_VALUES]), ("winner", list(WINNER_VALUES))):
        ch[c] = pd.Categorical(ch[c], categories=vals).codes.astype(np.int8)
    return ch.groupby([*_KEY, "winner"], sort=False).size().rename("count").reset_index()


def _sum_counts(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True).groupby([*_KEY, "winner"], sort=False, as_index=False)["count"].sum()
