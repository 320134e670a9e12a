"""Chunked reading of big files: a long-format file streamed into cell counts.

The binomial models depend on the judgments only through the cell counts, so :func:`read_comparisons` validates each
chunk (:class:`pydial.data.ingest.Validator`) and keeps only its counts.  Aggregated data carry no record ids, so
``cov_type="record"`` is refused; the other meats are identical to those computed from the rows.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from pydial.data.comparisons import Comparisons
from pydial.data.construction import column_names, covariate_sides, name_arguments
from pydial.data.features import comparison_values, covariate_names
from pydial.data.files import is_parquet, reading, require_columns
from pydial.data.ingest import Coded, Validator, aggregate, check_chunksize, concat, missing_records, progress
from pydial.exceptions import DataError
from pydial.resources import check_bytes

CHUNK_BYTES_PER_ROW = 400  # read_comparisons: a chunk as read (Arrow text) and its codes, per row
KEY_BYTES = 200  # read_comparisons: one key of the running counts while two tables of them are merged
RAW_ROWS = 16_000_000  # read_comparisons: rows kept as read (about 14 bytes each) before they are counted
TEXT_BYTES_PER_ROW = 16  # a lower bound of a long-format CSV row (gzip: per compressed byte), to estimate rows


def _chunks(path: Path, columns: list[str], chunksize: int, numeric: Sequence[str] = (), optional: str | None = None
            ) -> tuple[int | None, list[str], Iterator[Any]]:
    """Return the row count (``None``: unknown), the columns read and the record batches (identifiers as text)."""
    import pyarrow as pa

    if is_parquet(path):
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        columns = columns + [c for c in (optional,) if c is not None and c in schema.names]
        require_columns(schema.names, [*columns, *numeric], path, schema)
        pf = pq.ParquetFile(path, read_dictionary=columns)  # text as stored: codes into a dictionary
        return pf.metadata.num_rows, columns, pf.iter_batches(batch_size=chunksize, columns=[*columns, *numeric])
    import pyarrow.csv as pcsv

    with pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=1 << 16)) as head:
        columns = columns + [c for c in (optional,) if c is not None and c in head.schema.names]
        require_columns(head.schema.names, [*columns, *numeric], path)
    read = pcsv.ReadOptions(block_size=int(min(max(chunksize * 40, 1 << 16), 1 << 30)))
    convert = pcsv.ConvertOptions(column_types={c: pa.string() for c in columns}, include_columns=[*columns, *numeric],
                                  strings_can_be_null=False, quoted_strings_can_be_null=False)
    return None, columns, pcsv.open_csv(path, read_options=read, convert_options=convert)


def read_comparisons(path: str | PathLike[str], *, human_judge: str = "human", items: Sequence[str] | None = None,
                     chunksize: int = 1_000_000, drop_empty_judges: bool = False, strip_names: bool = True,
                     allow_similar_names: bool = False, columns: Mapping[str, str | None] | None = None,
                     covariates: Sequence[str] | None = None, covariate_transform: str = "difference",
                     self_preference: Mapping[str, Sequence[str]] | None = None) -> Comparisons:
    """Stream a long-format file into cell counts, chunk by chunk.

    Reads CSV (``.csv``), gzip CSV (``.csv.gz``) or Parquet (``.parquet``, ``.pq``) through pyarrow, about
    ``chunksize`` rows at a time, each chunk validated with the rules of :meth:`~pydial.Comparisons.from_frame` and
    kept as its counts per ``(judge, item_a, item_b, first, winner)``: memory is that of one chunk plus the counts.
    Identifiers are read as text as written (a Parquet column keeps its type: ``4`` is the name ``"4"``, ``4.0`` the
    name ``"4.0"``); a blank CSV cell is missing.  The result is aggregated data as from
    :meth:`~pydial.Comparisons.from_counts`, without record ids (``cov_type="record"`` needs ``from_frame`` /
    ``from_csv`` / ``from_parquet``), though a record-id column present is checked for missing or blank ids
    (``columns={"record_id": None}``: not read).  ``columns``, ``covariates``, ``covariate_transform`` and
    ``self_preference`` are those of :meth:`~pydial.Comparisons.from_frame`.  On a terminal a progress bar shows
    reads of two million rows or more.

    Examples
    --------
    >>> import pydial
    >>> from pydial.data.datasets import path
    >>> data = pydial.read_comparisons(path("synthetic"), columns={"record_id": None})
    >>> data.record_ids, data.n_llm > 0
    ((), True)

    Raises
    ------
    DataError
        Unreadable, truncated or corrupt file, missing columns, missing or blank names, unknown ``first`` (LLM rows)
        or ``winner`` values, naming the file, the column and the offending rows (0-based data-row numbers); a
        column name twice in the header; a list or struct column.
    ArgumentError
        ``chunksize`` is not a positive integer; ``items`` or ``self_preference`` lists no names; ``columns`` names
        an unknown field.
    ArgumentTypeError
        ``columns`` is not a mapping of field to column name.
    MemoryLimitError
        A chunk, or the counts gathered so far, would not fit in the memory available (see
        :func:`pydial.resources.memory_limit`); a smaller ``chunksize`` may help.
    """
    path = Path(path)
    chunksize = check_chunksize(chunksize)
    items, own = name_arguments(items, self_preference)
    mapping = column_names(columns, optional=("record_id",))
    record_id = mapping.pop("record_id")
    names = None if covariates is None else covariate_names(covariates)
    sides = covariate_sides(names)
    check_bytes(chunksize * CHUNK_BYTES_PER_ROW, f"reading {path.name} in chunks of {chunksize:,} rows",
                "pass a smaller chunksize")
    v = Validator(mapping, human_judge, strip=strip_names, allow_similar=allow_similar_names, blank_is_missing=True)
    parts: list[Coded] = []
    offset = 0
    with reading(path):
        rows, read, batches = _chunks(path, list(mapping.values()), chunksize, sides, record_id)
        with progress(rows, f"reading {path.name}", estimate=path.stat().st_size // TEXT_BYTES_PER_ROW) as advance:
            for batch in batches:
                n = batch.num_rows
                index = pd.RangeIndex(offset, offset + n)
                coded = v.chunk({c: batch.column(u) for c, u in mapping.items()}, index)
                if record_id is not None and record_id in read:
                    missing_records(batch.column(record_id), record_id, index)
                if names is not None:
                    side = pd.DataFrame({c: batch.column(c).to_numpy(zero_copy_only=False) for c in sides}, index=index)
                    coded.z = comparison_values(side, names, transform=covariate_transform)
                offset += n
                parts.append(coded)
                keys = sum(len(p) for p in parts)
                if keys > RAW_ROWS:  # count what was read so far: memory of the counts only
                    check_bytes(keys * KEY_BYTES, f"counting {path.name} ({keys:,} keys so far)",
                                      "aggregate the file where it lives (e.g. DuckDB, Spark) and pass the counts "
                                      "to Comparisons.from_counts")
                    parts = [aggregate(concat(parts), len(v.judges.texts), len(v.items.texts))]
                advance(n)
    if offset == 0:
        raise DataError(f"{path!s} has no rows")
    out = Comparisons.from_coded(v, concat(parts), items, drop_empty_judges,  # frees the rows once keyed
                                 names, covariate_transform)
    return out if own is None else out.with_self_preference(own, strip_names=strip_names)
