"""Aggregated input: pre-aggregated counts and chunked reading of big files.

The binomial models of the paper (eq. binomial-model-llm, eq. binomial-model-human)
depend on the judgments only through the cell counts ``(k, i, j, a, n, y)``, so
large logs can be aggregated where they live (a data warehouse, Dask, Spark) and
fitted here from the counts:

* :func:`comparisons_from_counts` (also :meth:`pydial.Comparisons.from_counts`) takes
  one row per ``(judge, item_a, item_b, first)`` with the counts ``wins_a, wins_b,
  ties`` (and optionally ``both_bad``);
* :func:`read_comparisons` streams a long-format file (CSV, gzip CSV or Parquet) in
  chunks and aggregates each chunk to counts, so the raw table is never in memory.

Both validate with the rules of :meth:`pydial.Comparisons.from_frame`
(:class:`pydial.ingest.Validator`).  Aggregated data carry no record ids: the
record-clustered covariance (``cov="record"``, eq. hac-meat with the record kernel) is
refused with :class:`~pydial.DataError`; the Fisher, binomial and judge-pair cell
meats need only the cell counts and are identical to those computed from the rows.

This module also reads the files for :meth:`~pydial.Comparisons.from_csv` and
:meth:`~pydial.Comparisons.from_parquet`: every failure to read (a missing,
truncated or corrupt file, a missing column) is a :class:`~pydial.DataError` naming
the file.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from .data import COLUMNS, Comparisons, canonical, report_changes
from .exceptions import DataError
from .ingest import (Coded, Validator, aggregate, check_read_memory, concat, group, human_name, pack, progress,
                     rows_text, triangle, unpack)

COUNT_COLUMNS: tuple[str, ...] = ("judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties")
"""Required columns of :func:`comparisons_from_counts` (``both_bad`` is optional)."""

_COUNTS = ("wins_a", "wins_b", "ties", "both_bad")  # in the order of WINNER_VALUES
MAX_TOTAL = 2**53  # judgments in all: the cell tables hold counts as float64, exact below 2**53
CHUNK_BYTES_PER_ROW = 400  # read_comparisons: a chunk as read (Arrow text) and its codes, per row
KEY_BYTES = 200  # read_comparisons: one key of the running counts while two tables of them are merged
PARQUET_SUFFIXES = (".parquet", ".pq")
TEXT_BYTES_PER_ROW = 16  # a lower bound of a long-format CSV row (gzip: per compressed byte), to estimate rows


def comparisons_from_counts(df: pd.DataFrame, *, human_judge: str = "human", items: Sequence[str] | None = None,
                            drop_empty_judges: bool = False, strip_names: bool = True,
                            allow_similar_names: bool = False) -> Comparisons:
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
    drop_empty_judges, strip_names, allow_similar_names : bool
        As in :meth:`~pydial.Comparisons.from_frame`: names are text (``4`` and ``4.0``
        are two spellings of one name and refused), stripped of surrounding whitespace
        (reported), and two names differing only by case or whitespace are refused.

    Raises
    ------
    DataError
        Missing columns, missing or blank names, an unknown ``first`` on an LLM row,
        or counts that are not non-negative integers or sum to ``2**53`` or more (the
        rows are named).
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in COUNT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"missing column(s) {missing} for aggregated counts; the table has columns {list(df.columns)} "
                        f"(need {list(COUNT_COLUMNS)}, optional 'both_bad')")
    v = Validator({c: c for c in COLUMNS[1:]}, human_name(human_judge, strip_names), strip=strip_names,
                  allow_similar=allow_similar_names)
    coded = v.chunk({c: df[c] for c in COUNT_COLUMNS[:4]}, df.index, with_winner=False)
    parts = []
    for w, col in enumerate(_COUNTS):
        if col not in df.columns:
            continue
        n = _counts(df[col], col, df.index)
        part = coded.select(n > 0)
        parts.append(Coded(part.judge, part.item_a, part.item_b, part.first, np.full(len(part), w, np.int8), n[n > 0]))
    v.finish(items)
    return comparisons_from_coded(v, concat(parts), items, drop_empty_judges)


def _counts(values: pd.Series, col: str, index: pd.Index) -> np.ndarray:
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


def comparisons_from_coded(v: Validator, coded: Coded, items: Sequence[Any] | None,
                           drop_empty_judges: bool) -> Comparisons:
    """Build aggregated :class:`~pydial.Comparisons` from validated counts (the names of ``v``).

    The canonical frame holds one row per ``(judge, i, j, a, outcome)`` with its
    ``count``, judges in name order, whatever the order or chunking of the input.
    """
    names, item_index = Comparisons._items(v, items)
    assert coded.count is not None
    total = float(coded.count.sum(dtype=float))
    if total == 0:
        raise DataError("the count table holds no judgment (all counts are 0)")
    if total >= MAX_TOTAL:
        raise DataError(f"the counts sum to {total:.3g} judgments, 2**53 or more; counts that large are not exact")
    texts = np.asarray(v.judges.texts, dtype=object)
    order = np.argsort(texts, kind="stable")
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    human = v.judges.ids.get(v.human_judge, -1)
    is_human = coded.judge == human
    c = canonical(coded, item_index, is_human)
    i, j = c["i"].astype(np.int64), c["j"].astype(np.int64)
    sizes = (len(texts), len(names) * (len(names) + 1) // 2, 3, 4)  # pairs i <= j counted once
    uk, inv = group(pack([rank[coded.judge], j * (j + 1) // 2 + i, c["a"] + 1, c["outcome"]], sizes, invertible=True))
    count = np.bincount(inv, weights=coded.count, minlength=uk.size).astype(np.int64)
    judge, pair, a, outcome = unpack(uk, sizes)
    j, i = triangle(pair)
    canon = pd.DataFrame({"record_id": None, "judge": pd.Categorical.from_codes(judge, texts[order].tolist()),
                          "i": i.astype(np.int32), "j": j.astype(np.int32), "a": (a - 1).astype(np.int8),
                          "outcome": outcome.astype(np.int8), "self": i == j, "count": count}, copy=False)
    out = Comparisons._finish(canon, judge == (rank[human] if human >= 0 else -1), names, v.human_judge,
                              drop_empty_judges)
    report_changes(out, v)
    return out


# --------------------------------------------------------------- files
@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn every failure to read ``path`` into a :class:`DataError` naming the file."""
    from pyarrow.lib import ArrowException

    try:
        yield
    except (DataError, MemoryError):
        raise
    except pd.errors.EmptyDataError as e:
        raise DataError(f"cannot read {path!s}: the file is empty (no header, no rows)") from e
    except (OSError, ValueError, EOFError, zlib.error, ArrowException, pd.errors.ParserError) as e:
        raise DataError(f"cannot read {path!s}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e


def is_parquet(path: str | PathLike[str]) -> bool:
    """Whether ``path`` names a Parquet file (``.parquet`` or ``.pq``)."""
    return Path(path).name.lower().endswith(PARQUET_SUFFIXES)


def _require_columns(found: Sequence[str], wanted: Sequence[str], path: Path) -> None:
    missing = [c for c in wanted if c not in found]
    if missing:
        raise DataError(f"{path!s} lacks the column(s) {missing}; it has {list(found)}. Map other names with the keyword "
                        "arguments judge=, item_a=, item_b=, first=, winner= (record_id= for the rows)")


def read_csv(path: str | PathLike[str], **kwargs: Any) -> pd.DataFrame:
    """Read a whole CSV with every column as text exactly as written; a blank cell is missing.

    ``kwargs`` go to :func:`pandas.read_csv` (defaults ``dtype=str``,
    ``keep_default_na=False``).
    """
    p = Path(path)
    with reading(p):
        df = pd.read_csv(p, **{"dtype": str, "keep_default_na": False, **kwargs})
    for col in df.columns:  # with keep_default_na=False only a blank cell is missing
        if pd.api.types.is_string_dtype(df[col].dtype):
            blank = df[col].str.strip().eq("").to_numpy(dtype=bool, na_value=False)
            if blank.any():
                df[col] = df[col].astype(object).where(~blank, None)
    return df


def read_parquet(path: str | PathLike[str], columns: Sequence[str], bytes_per_row: int) -> pd.DataFrame:
    """Read ``columns`` of a Parquet file into pandas, after checking that they and ``bytes_per_row`` more fit."""
    import pyarrow.parquet as pq

    p = Path(path)
    with reading(p):
        pf = pq.ParquetFile(p)
        _require_columns(pf.schema_arrow.names, columns, p)
        meta = pf.metadata
        where = [pf.schema_arrow.names.index(c) for c in columns]
        size = sum(meta.row_group(g).column(k).total_uncompressed_size for g in range(meta.num_row_groups)
                   for k in where)
        check_read_memory(2 * size + meta.num_rows * bytes_per_row, f"reading {meta.num_rows:,} rows of {p.name}",
                          "aggregate it with pydial.read_comparisons (chunk by chunk, counts only)")
        return pf.read(columns=list(columns)).to_pandas()


def _chunks(path: Path, columns: list[str], chunksize: int) -> tuple[int | None, Iterator[Any]]:
    """Return the number of rows (``None`` when unknown) and the chunks of ``columns`` as pyarrow record batches.

    Text columns stay text; a CSV is read with every column as a string, no cell null.
    """
    import pyarrow as pa

    if is_parquet(path):
        import pyarrow.parquet as pq

        _require_columns(pq.read_schema(path).names, columns, path)
        pf = pq.ParquetFile(path, read_dictionary=columns)  # text as stored: codes into a dictionary
        return pf.metadata.num_rows, pf.iter_batches(batch_size=chunksize, columns=columns)
    import pyarrow.csv as pcsv

    with pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=1 << 16)) as head:
        _require_columns(head.schema.names, columns, path)
    read = pcsv.ReadOptions(block_size=int(min(max(chunksize * 40, 1 << 16), 1 << 30)))
    convert = pcsv.ConvertOptions(column_types={c: pa.string() for c in columns}, include_columns=columns,
                                  strings_can_be_null=False, quoted_strings_can_be_null=False)
    return None, pcsv.open_csv(path, read_options=read, convert_options=convert)


def read_comparisons(path: str | PathLike[str], *, human_judge: str = "human", items: Sequence[str] | None = None,
                     chunksize: int = 1_000_000, drop_empty_judges: bool = False, strip_names: bool = True,
                     allow_similar_names: bool = False, judge: str = "judge", item_a: str = "item_a",
                     item_b: str = "item_b", first: str = "first", winner: str = "winner") -> Comparisons:
    """Stream a long-format file into cell counts, chunk by chunk.

    Reads CSV (``.csv``), gzip CSV (``.csv.gz``) or Parquet (``.parquet``, ``.pq``)
    through pyarrow, about ``chunksize`` rows at a time; each chunk is validated on its
    distinct values with the rules of :meth:`~pydial.Comparisons.from_frame` and only
    its counts per ``(judge, item_a, item_b, first, winner)`` are kept, so memory is that
    of one chunk plus the counts, not the whole table.  Identifier columns are read as
    text exactly as written (a Parquet column keeps its type: an integer ``4`` is the
    name ``"4"``, a float ``4.0`` the name ``"4.0"``, and both in one file are refused as
    in ``from_frame``); a blank cell of a CSV is missing.  The record ids are not kept:
    the result is aggregated data as from :meth:`~pydial.Comparisons.from_counts`
    (``cov="record"`` needs :meth:`~pydial.Comparisons.from_frame` / ``from_csv`` /
    ``from_parquet``).  On a terminal a progress bar shows reads of two million rows or
    more.

    Raises
    ------
    DataError
        Unreadable, truncated or corrupt file, missing columns, missing or blank names,
        unknown ``first`` (LLM rows) or ``winner`` values, naming the file, the column and
        the offending rows (0-based data-row numbers).
    MemoryLimitError
        A chunk, or the counts gathered so far, would not fit in the memory available
        (see :func:`pydial.ingest.memory_available`); a smaller ``chunksize`` may help.
    """
    path = Path(path)
    mapping = dict(zip(COLUMNS[1:], (judge, item_a, item_b, first, winner)))
    check_read_memory(chunksize * CHUNK_BYTES_PER_ROW, f"reading {path.name} in chunks of {chunksize:,} rows",
                      "pass a smaller chunksize")
    v = Validator(mapping, human_name(human_judge, strip_names), strip=strip_names, allow_similar=allow_similar_names,
                  blank_is_missing=True)
    parts: list[Coded] = []
    offset = 0
    with reading(path):
        rows, batches = _chunks(path, list(mapping.values()), chunksize)
        with progress(rows, f"reading {path.name}", estimate=path.stat().st_size // TEXT_BYTES_PER_ROW) as advance:
            for batch in batches:
                n = batch.num_rows
                coded = v.chunk({c: batch.column(u) for c, u in mapping.items()}, pd.RangeIndex(offset, offset + n))
                offset += n
                parts.append(aggregate(coded, len(v.judges.texts), len(v.items.texts)))
                if len(parts) > 8:  # keep the running counts compact
                    keys = sum(len(p) for p in parts)
                    check_read_memory(keys * KEY_BYTES, f"counting {path.name} ({keys:,} distinct keys so far)",
                                      "aggregate the file where it lives (e.g. DuckDB, Spark) and pass the counts "
                                      "to Comparisons.from_counts")
                    parts = [aggregate(concat(parts), len(v.judges.texts), len(v.items.texts))]
                advance(n)
    if offset == 0:
        raise DataError(f"{path!s} has no rows")
    v.finish(items)
    return comparisons_from_coded(v, concat(parts), items, drop_empty_judges)
