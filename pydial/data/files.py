"""Reading the files of the long format: every failure is a :class:`~pydial.DataError` naming the file.

:func:`reading` turns missing, empty, truncated or corrupt files into ``DataError``; :func:`require_columns` refuses a
needed column repeated in the header or holding lists; :func:`read_csv` reads every column as text as written.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd

from pydial.data.ingest import COLUMN_HINT, blank_text, check_columns
from pydial.exceptions import DataError, DialError
from pydial.resources import check_bytes

__all__ = ["PARQUET_SUFFIXES", "reading", "is_parquet", "require_columns", "read_csv", "read_parquet"]

PARQUET_SUFFIXES = (".parquet", ".pq")
"""File name endings read as Parquet."""


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn every failure to read ``path`` into a :class:`DataError` naming the file."""
    from pyarrow.lib import ArrowException

    try:
        yield
    except (DialError, MemoryError):  # already typed (e.g. a bad PYDIAL_MEMORY_LIMIT is an ArgumentError)
        raise
    except pd.errors.EmptyDataError as e:
        raise DataError(f"cannot read {path!s}: the file is empty (no header, no rows)") from e
    except (OSError, ValueError, EOFError, zlib.error, ArrowException, pd.errors.ParserError) as e:
        raise DataError(f"cannot read {path!s}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e


def is_parquet(path: str | PathLike[str]) -> bool:
    """Whether ``path`` names a Parquet file (``.parquet`` or ``.pq``)."""
    return Path(path).name.lower().endswith(PARQUET_SUFFIXES)


def require_columns(found: Sequence[str], wanted: Sequence[str], path: Path, schema: Any = None) -> None:
    """Refuse columns of ``wanted`` missing from ``found`` or in it twice (with a Parquet ``schema``: nested ones too)."""
    check_columns(found, wanted, str(path))
    if schema is not None:
        import pyarrow as pa

        for c in wanted:
            kind = schema.field(c).type if c in found else None
            value = kind.value_type if isinstance(kind, pa.DictionaryType) else kind
            if value is not None and pa.types.is_nested(value):
                raise DataError(f"column {c!r} of {path!s} holds {value} values; every cell must be a single value "
                                "(a name, a record id, a/b, a winner label, a number), not a list, struct or map")
    missing = [c for c in wanted if c not in found]
    if missing:
        raise DataError(f"{path!s} lacks the column(s) {missing}; it has {list(found)}. {COLUMN_HINT}")


def csv_header(path: Path, kwargs: dict[str, Any]) -> list[str] | None:
    """Return a CSV's header row as written (pandas renames a repeated ``x``); ``None`` without one or with ``names=``."""
    header = kwargs.get("header", "infer")
    if kwargs.get("names") is not None or not (header == "infer" or isinstance(header, int)):
        return None
    row = 0 if header == "infer" else int(header)
    raw = pd.read_csv(path, **{**kwargs, "header": None, "nrows": row + 1, "dtype": str, "keep_default_na": False,
                               "usecols": None, "index_col": False})
    return [str(x) for x in raw.iloc[row]] if len(raw) > row else None


def read_csv(path: str | PathLike[str], columns: Sequence[str] = (), **kwargs: Any) -> pd.DataFrame:
    """Read a whole CSV with every column as text as written (blank: missing); a ``columns`` name twice is a DataError."""
    p = Path(path)
    with reading(p):
        header = csv_header(p, kwargs) if columns else None
        if header is not None:
            check_columns(header, columns, str(p))
        df = pd.read_csv(p, **{"dtype": str, "keep_default_na": False, **kwargs})
    for col in df.columns:  # with keep_default_na=False only a blank cell is missing
        if pd.api.types.is_string_dtype(df[col].dtype):
            blank = blank_text(df[col])
            if blank.any():
                df[col] = df[col].astype(object).where(~blank, None)
    return df


def read_parquet(path: str | PathLike[str], columns: Sequence[str], bytes_per_row: int) -> pd.DataFrame:
    """Read ``columns`` of a Parquet file into pandas, after checking that they and ``bytes_per_row`` more fit."""
    import pyarrow.parquet as pq

    p = Path(path)
    with reading(p):
        pf = pq.ParquetFile(p)
        require_columns(pf.schema_arrow.names, columns, p, pf.schema_arrow)
        meta = pf.metadata
        where = [pf.schema_arrow.names.index(c) for c in columns]
        size = sum(meta.row_group(g).column(k).total_uncompressed_size for g in range(meta.num_row_groups)
                   for k in where)
        check_bytes(2 * size + meta.num_rows * bytes_per_row, f"reading {meta.num_rows:,} rows of {p.name}",
                          "aggregate it with pydial.read_comparisons (chunk by chunk, counts only)")
        return pf.read(columns=list(columns)).to_pandas()
