"""Reading the files of the long format: every failure is a :class:`~pydial.DataError` naming the file.

A missing, empty, truncated or corrupt file (also a broken gzip stream), an unreadable
Parquet file or one without a needed column: :func:`reading` turns each into a
``DataError``.  :func:`read_csv` reads every column as text exactly as written (only a
blank cell is missing); :func:`read_parquet` checks the memory the rows need before
reading them.  Used by :meth:`pydial.Comparisons.from_csv`, ``from_parquet``,
:func:`pydial.read_comparisons` and :mod:`pydial.io`.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd

from pydial.data.ingest import check_read_memory
from pydial.exceptions import DataError

__all__ = ["PARQUET_SUFFIXES", "reading", "is_parquet", "require_columns", "read_csv", "read_parquet"]

PARQUET_SUFFIXES = (".parquet", ".pq")
"""File name endings read as Parquet."""


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


def require_columns(found: Sequence[str], wanted: Sequence[str], path: Path) -> None:
    """Raise :class:`DataError` naming the file and the columns of ``wanted`` not in ``found``."""
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
        require_columns(pf.schema_arrow.names, columns, p)
        meta = pf.metadata
        where = [pf.schema_arrow.names.index(c) for c in columns]
        size = sum(meta.row_group(g).column(k).total_uncompressed_size for g in range(meta.num_row_groups)
                   for k in where)
        check_read_memory(2 * size + meta.num_rows * bytes_per_row, f"reading {meta.num_rows:,} rows of {p.name}",
                          "aggregate it with pydial.read_comparisons (chunk by chunk, counts only)")
        return pf.read(columns=list(columns)).to_pandas()
