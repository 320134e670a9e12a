"""Building :class:`pydial.Comparisons` from a long table, a file or counts: validation and canonical coding.

These functions are the class's ``from_*`` methods (``cls`` is the class; this module does not import it).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import replace
from os import PathLike
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar, cast

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from pydial.data.cells import I_WINS, J_WINS, TIE
from pydial.data.features import comparison_values, covariate_names, standardize
from pydial.data.files import read_csv, read_parquet
from pydial.data.ingest import (COLUMN_HINT, COLUMNS, FIRST_A, Coded, Keys, RowCoder, Validator, blank_text, check_cells,
                                check_columns, concat, duplicated, fail_rows, group, pack, pair_index, pair_items,
                                rows_text)
from pydial.data.names import NameReport, name_list, own_items
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError, DataWarning
from pydial.resources import check_bytes, check_choice

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
    """Return the peak memory of :meth:`pydial.Comparisons.from_frame` beyond its input (measured 103-336 B a row)."""
    once, each = FRAME_BYTES_COVARIATES
    return rows * (FRAME_BYTES_PER_ROW + (once + each * p if p else 0))


def name_arguments(items: Any, self_preference: Any) -> tuple[list[Any] | None, dict[Any, list[Any]] | None]:
    """Return ``items=`` and ``self_preference=`` checked as lists (``None`` where not given), before a read."""
    return (None if items is None else name_list(items, "items"),
            None if self_preference is None else own_items(self_preference))


COVARIATE_PREFIX = "cov:"
"""Prefix of the covariate columns of :attr:`Comparisons.frame` (standardized, canonical orientation)."""

SELF_PREFERENCE = "self_preference"
"""The name of the self-preference covariate (:meth:`Comparisons.with_self_preference`)."""


def canonical(coded: Coded, item_index: np.ndarray, is_human: np.ndarray, scale: pd.Series | None = None
              ) -> dict[str, np.ndarray]:
    """Return the canonical coding of ``coded``: ``i < j`` (int32), display order ``a`` (+1, -1, 0 human), outcome, ``self``.

    With a ``scale`` (by covariate name), also the columns ``cov:<name>`` of ``coded.z`` standardized, ``-z`` where swapped.
    """
    ia, ib = item_index[coded.item_a], item_index[coded.item_b]
    swap = ia > ib
    a = np.where((coded.first == FIRST_A) != swap, np.int8(1), np.int8(-1))
    a[is_human] = 0
    w = coded.winner  # index into WINNER_VALUES: a, b, tie (= TIE), both_bad (= BOTH_BAD)
    outcome = np.where(w >= TIE, w, np.where((w == 0) != swap, np.int8(I_WINS), np.int8(J_WINS)))
    out = {"i": np.minimum(ia, ib), "j": np.maximum(ia, ib), "a": a, "outcome": outcome, "self": ia == ib}
    if coded.z is not None and scale is not None:
        z = np.where(swap[:, None], -coded.z, coded.z) / scale.to_numpy()
        out.update({COVARIATE_PREFIX + c: z[:, t] for t, c in enumerate(scale.index)})
    return out


def column_names(columns: Any, optional: Sequence[str] = ()) -> dict[str, Any]:
    """Return each of the six fields' column name from ``columns`` (``None`` skips a field of ``optional``).

    A non-mapping or non-text name raises :class:`~pydial.ArgumentTypeError`, an unknown field :class:`~pydial.ArgumentError`.
    """
    columns = {} if columns is None else columns
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


def unknown_keywords(caller: str, given: Iterable[str], known: Iterable[str], accepts: str) -> None:
    """Refuse keywords of ``given`` not in ``known`` (:class:`~pydial.ArgumentTypeError`, with the likely intended one)."""
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


def covariate_sides(names: Sequence[str] | None) -> list[str]:
    """Return the per-side columns ``<name>_a``, ``<name>_b`` of the covariates ``names`` (none for ``None``)."""
    return [f"{c}{side}" for c in names or () for side in ("_a", "_b")]


def factorize_records(rec: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Return ``pd.factorize(rec)`` (codes, ``-1`` missing; distinct ids), coding sorted integer ids by their runs."""
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


def report_changes(data: Any, v: Validator) -> None:
    """Record the names ``v`` cleaned in ``data.summary()`` and warn (:class:`DataWarning`) if any."""
    report = NameReport()
    v.judges.report(report)
    v.items.report(report)
    data.frame.attrs["names_stripped"] = report.text()
    if report.n_stripped:
        warnings.warn(f"{report.what()} from {report.text()}", DataWarning, stacklevel=3)


COUNT_COLUMNS: tuple[str, ...] = ("judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties")
"""Required columns of :meth:`Comparisons.from_counts` (``both_bad`` is optional)."""

_COUNTS = ("wins_a", "wins_b", "ties", "both_bad")  # in the order of WINNER_VALUES
MAX_TOTAL = 2**53  # judgments in all: the cell tables hold counts as float64, exact below 2**53


def _count_column(values: pd.Series, col: str, index: pd.Index) -> np.ndarray:
    """Validate one count column: non-negative integers below ``2**53`` (bad rows named)."""
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu":  # numpy integers: no conversion to check
        n = values.to_numpy()
        if not ((n < 0) | (n >= MAX_TOTAL)).any():
            return n.astype(np.int64, copy=False)
    f = np.asarray(pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan))
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(f) | (f < 0) | (f != np.round(f)) | (f >= MAX_TOTAL)
    if bad.any():
        raise DataError(f"column {col!r} must hold non-negative integer counts below 2**53; bad values at "
                        f"{rows_text(index[bad])}")
    return f.astype(np.int64)  # exact below 2**53, as checked


@frame_keywords
def from_frame(cls: Any, df: pd.DataFrame, *, human_judge: Any = "human", items: Sequence[Any] | None = None,
               drop_empty_judges: bool = False, strip_names: bool = True, allow_similar_names: bool = False,
               duplicates: str = "keep", columns: Mapping[str, str] | None = None,
               covariates: Sequence[str] | None = None, covariate_transform: str = "difference",
               self_preference: Mapping[str, Sequence[str]] | None = None) -> Any:
    """Validate a long table of judgments and aggregate it to cells.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per judgment.
    human_judge : str or number, default "human"
        Value of the judge column that marks human labels; converted to text like the judge names (``0`` matches
        an integer judge column, ``"0"`` a CSV).
    items : sequence of str, optional
        Item order (defines the item index and hence canonical orientation); default the sorted distinct item
        names.  Items listed here but never compared are kept (they get scores only through the LLM space).
    drop_empty_judges : bool, default False
        An LLM judge with no decisive judgment (every row a tie, "both bad" or a self-comparison) raises
        :class:`DataError`; with ``True`` it is removed and counted in :meth:`~pydial.Comparisons.summary` instead.
    strip_names : bool, default True
        Clean judge and item names (Unicode NFC; surrounding whitespace and invisible characters stripped), reported
        by :meth:`~pydial.Comparisons.summary` and a :class:`DataWarning`.
    allow_similar_names : bool, default False
        Keep names that differ only by letter case, whitespace, invisible characters, Unicode normal form or numeric
        type (``4``, ``4.0``) apart; by default they raise :class:`DataError` (see :mod:`pydial.data.names`).
    duplicates : {"keep", "drop", "raise"}, default "keep"
        Rows identical in all six columns: counted as separate judgments, or the first of each group kept (both
        reported by :meth:`~pydial.Comparisons.summary` and a :class:`DataWarning`), or refused.
    columns : mapping of str to str, optional
        The column of ``df`` holding each of the six fields of the long format (``record_id``, ``judge``,
        ``item_a``, ``item_b``, ``first``, ``winner``) that is named otherwise, e.g. ``{"judge": "annotator"}``.
    covariates : sequence of str, optional
        Response covariates (beyond the paper: style control), each from the numeric columns ``<name>_a``, ``<name>_b``
        (:func:`pydial.features.style`): their ``covariate_transform`` divided by its root mean square over the rows
        (:attr:`~pydial.Comparisons.covariate_scale`); other covariate values make other cells.
    covariate_transform : {"difference", "normalized"}, default "difference"
        ``x_a - x_b``, or LMArena's ``(x_a - x_b) / (x_a + x_b)`` (:func:`pydial.features.comparison_covariates`).
    self_preference : mapping of str to sequence of str, optional
        Each LLM judge's own items (``{"gpt-4": ["gpt-4-0613", "gpt-4-turbo"]}``): adds the covariate
        ``"self_preference"`` of :meth:`~pydial.Comparisons.with_self_preference` after the others.

    Notes
    -----
    Judge and item names are text (:mod:`pydial.data.names`): string cells are used as written, other cells
    through :func:`str` (``4 -> "4"``, ``4.0 -> "4.0"``), ``human_judge`` too.

    Raises
    ------
    DataError
        Missing columns, missing values, list / dict cells, unknown ``first`` / ``winner`` values, blank judge
        or item names, two spellings of one name, refused duplicates, or an LLM judge without decisive
        judgments; a missing, non-numeric, infinite or constant covariate (naming the column and rows); a needed
        column twice, or MultiIndex columns.
    ArgumentError
        ``human_judge`` is not a name, ``items`` is not a list of names (e.g. a string), ``self_preference``
        does not map judges to names (e.g. ``{"j": None}``), ``columns`` names an unknown field.
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
    items, own, cov_names = _checked_arguments(df, "the table", mapping.values(), items, self_preference, covariates)
    missing = [f"{v!r} (for {k})" if k != v else repr(v) for k, v in mapping.items() if v not in df.columns]
    if missing:
        raise DataError(f"missing column(s) {', '.join(missing)}; the table has columns {list(df.columns)}. {COLUMN_HINT}")
    check_choice("duplicates", duplicates, DUPLICATES)
    if len(df) == 0:
        raise DataError("the comparison table has no rows")
    check_bytes(frame_bytes(len(df), len(cov_names or ())), f"Comparisons.from_frame of {len(df):,} rows",
                      "aggregate the judgments to counts first (Comparisons.from_counts, or pydial.read_comparisons "
                      "for a file), or read a part of the table")
    v = Validator(mapping, human_judge, strip=strip_names, allow_similar=allow_similar_names)
    rec = df[record_id]
    if rec.dtype == object and infer_dtype(rec, skipna=True).startswith("mixed"):
        check_cells(rec, record_id)
    rec_codes, rec_ids = factorize_records(rec)
    no_id = np.append(blank_text(rec_ids), True)[rec_codes]  # missing (code -1) or blank: a whitespace-only id, as in a CSV
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
    names, item_index = item_names(v, items)
    is_human = coded.judge == v.judges.ids.get(v.human_judge, -1)
    scale = None if cov_names is None or coded.z is None else standardize(
        coded.z, cov_names, transform=covariate_transform)[1]
    canon = pd.DataFrame({"record_id": record, "judge": pd.Categorical.from_codes(coded.judge, v.judges.texts),
                          **canonical(coded, item_index, is_human, scale)}, index=index, copy=False)
    del coded
    out = cls._build(canon, tuple(names), None, v.human_judge, records=(rec_codes, rec_ids),
                     covariates=(scale, covariate_transform if scale is not None else None), drop_empty_judges=drop_empty_judges)
    out.frame.attrs["duplicated_rows"] = (n_dup, "dropped" if duplicates == "drop" else "kept")
    report_changes(out, v)
    if own is not None:
        out = out.with_self_preference(own, strip_names=strip_names)
    if n_dup:
        warnings.warn(f"{n_dup} duplicated row(s) (identical in all six columns) "
                      f"{'dropped' if duplicates == 'drop' else 'kept as separate judgments'} "
                      f"at {rows_text(df.index[dup], 3)}", DataWarning, stacklevel=2)
    return out


def _checked_arguments(df: Any, what: str, columns: Iterable[str], items: Any, self_preference: Any,
                       covariates: Any) -> tuple[list[Any] | None, dict[Any, list[Any]] | None, list[str] | None]:
    """Check ``df`` (a DataFrame, one level of column names, ``columns`` and covariate sides once) and the names."""
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if isinstance(df.columns, pd.MultiIndex):
        raise DataError(f"{what} has {df.columns.nlevels} levels of column names (a MultiIndex, e.g. "
                        f"{df.columns[0]!r}); flatten them to one name per column, e.g. with "
                        "df.columns = ['_'.join(map(str, c)) for c in df.columns]")
    items, own = name_arguments(items, self_preference)
    cov_names = None if covariates is None else covariate_names(covariates)
    check_columns(df.columns, [*columns, *covariate_sides(cov_names)], what)
    return items, own, cov_names


def item_names(v: Validator, items: Sequence[Any] | None) -> tuple[list[str], np.ndarray]:
    """Check the names of ``v`` (:meth:`Validator.finish`); return the item names in index order and each name id's index.

    The order is sorted, or that of ``items=`` (checked by :func:`name_arguments`), cleaned as the data's names are.
    """
    v.finish(items)
    seen = v.items.texts
    names = sorted(seen) if items is None else [v.items.text(x, f"items[{k}]") for k, x in enumerate(items)]
    if items is not None:
        repeated = sorted({x for x in names if names.count(x) > 1}) if len(set(names)) != len(names) else []
        if repeated:
            raise DataError(f"items= lists the item(s) {repeated[:5]} more than once (after the names are "
                            "cleaned as the data's are: Unicode NFC, surrounding whitespace stripped)")
        unknown = sorted(set(seen) - set(names))
        if unknown:
            raise DataError(f"items {unknown[:5]} appear in the data but not in items=")
    if len(names) < 2:
        raise DataError(f"need at least two items, found {names}")
    index = {name: k for k, name in enumerate(names)}
    return names, np.asarray([index[t] for t in seen], dtype=np.int32)


def from_counts(cls: Any, df: pd.DataFrame, *, human_judge: str = "human", items: Sequence[str] | None = None,
                drop_empty_judges: bool = False, strip_names: bool = True, allow_similar_names: bool = False,
                covariates: Sequence[str] | None = None, covariate_transform: str = "difference",
                self_preference: Mapping[str, Sequence[str]] | None = None) -> Any:
    """Build from pre-aggregated counts, validated with the rules of :meth:`~pydial.Comparisons.from_frame`.

    The result has no record ids, so ``cov_type="record"`` is refused with :class:`DataError`; every other
    covariance equals the one computed from the rows (the binomial models depend on them only through the counts).

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``judge, item_a, item_b, first, wins_a, wins_b, ties`` and optionally ``both_bad``: the number of
        judgments of ``judge`` on ``(item_a, item_b)`` shown in order ``first`` (``"a"`` or ``"b"``; ignored and
        may be empty on the human judge's rows) won by ``item_a``, by ``item_b``, tied and judged both bad.  Rows
        with the same key are summed.
    human_judge : str, default "human"
        The judge name whose rows are the human labels.
    items : sequence of str, optional
        Item order (as in :meth:`~pydial.Comparisons.from_frame`).
    drop_empty_judges, strip_names, allow_similar_names : bool
        As in :meth:`~pydial.Comparisons.from_frame` (names are text; ``4`` and ``4.0`` are one name's spellings).
    covariates, covariate_transform
        As in :meth:`~pydial.Comparisons.from_frame`; the columns ``<name>_a``, ``<name>_b`` of a row hold the
        covariates of all its judgments, and the root mean square is over the judgments.
    self_preference : mapping of str to sequence of str, optional
        As in :meth:`~pydial.Comparisons.from_frame`.

    Raises
    ------
    DataError
        Missing columns, missing or blank names, an unknown ``first`` on an LLM row, or counts that are not
        non-negative integers or sum to ``2**53`` or more (the rows are named).
    """
    items, own, cov_names = _checked_arguments(df, "the count table", [*COUNT_COLUMNS, "both_bad"], items,
                                               self_preference, covariates)
    missing = [c for c in COUNT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"missing column(s) {missing} for aggregated counts; the table has columns {list(df.columns)} "
                        f"(need {list(COUNT_COLUMNS)}, optional 'both_bad')")
    v = Validator({c: c for c in COLUMNS[1:]}, human_judge, strip=strip_names, allow_similar=allow_similar_names)
    coded = v.chunk({c: df[c] for c in COUNT_COLUMNS[:4]}, df.index, with_winner=False)
    if cov_names is not None:
        coded.z = comparison_values(df, cov_names, transform=covariate_transform)
    parts = []
    for w, col in enumerate(_COUNTS):
        if col in df.columns:
            n = _count_column(df[col], col, df.index)
            parts.append(replace(coded.select(n > 0), winner=np.full(np.count_nonzero(n), w, np.int8), count=n[n > 0]))
    out = cls.from_coded(v, concat(parts), items, drop_empty_judges, cov_names, covariate_transform)
    return out if own is None else out.with_self_preference(own, strip_names=strip_names)


def from_coded(cls: Any, v: Validator, coded: Coded, items: Sequence[Any] | None,
               drop_empty_judges: bool = False, covariates: Sequence[str] | None = None,
               covariate_transform: str = "difference") -> Any:
    """Build aggregated data from validated counts (``coded.count``, or rows as read; the names of ``v``, checked here).

    The common end of :meth:`~pydial.Comparisons.from_counts` and :func:`pydial.read_comparisons`: the frame holds one
    row per ``(judge, i, j, a, outcome[, z])`` with its ``count``, whatever the input's order ordered as the cells are
    (judges by name, the human judge last, then ``i``, ``j``, ``a``), so that they are formed from runs of rows.
    """
    names, item_index = item_names(v, items)
    total = float(len(coded) if coded.count is None else coded.count.sum(dtype=float))
    if total == 0:
        raise DataError("the count table holds no judgment (all counts are 0)")
    if total >= MAX_TOTAL:
        raise DataError(f"the counts sum to {total:.3g} judgments, 2**53 or more; counts that large are not exact")
    texts = np.asarray(v.judges.texts, dtype=object)
    order = np.argsort(texts, kind="stable")
    human = v.judges.ids.get(v.human_judge, -1)
    # the keys order the rows as Comparisons._build orders its cells: judges by name, the human judge last, then (i, j, a)
    key_order = np.concatenate([order[order != human], [human] if human >= 0 else []]).astype(np.int64)
    rank = np.argsort(key_order)  # each judge's position in the keys' order
    category = np.argsort(order)[key_order]  # position in the keys' order -> position in name order (the categories)
    scale = None if covariates is None or coded.z is None else standardize(
        coded.z, covariates, weights=coded.count, transform=covariate_transform)[1]
    c = canonical(coded, item_index, coded.judge == human, scale)
    i, j = c["i"].astype(np.int64), c["j"].astype(np.int64)
    rc = None if scale is None else RowCoder(np.column_stack([c[COVARIATE_PREFIX + t] for t in scale.index]))
    keys = Keys((len(texts), len(names) * (len(names) + 1) // 2, 3, 4,  # pairs i <= j counted once
                 *(() if rc is None else (len(rc),))))
    key = keys.encode([rank[coded.judge], pair_index(i, j, len(names)), c["a"] + 1, c["outcome"],
                       *(() if rc is None else (rc.codes,))])
    weights = coded.count
    del coded, c, i, j  # the rows (often the caller's only copy) are no longer needed
    uk, inv = group(key)
    del key
    count = np.bincount(inv, weights=weights, minlength=uk.size).astype(np.int64, copy=False)
    del inv, weights
    judge, pair, a, outcome, *zc = keys.decode(uk)
    del uk
    z_cols = {} if rc is None else {COVARIATE_PREFIX + name: rc.table[zc[0], t] for t, name in enumerate(covariates or ())}
    i, j = pair_items(pair, len(names))
    del pair
    canon = pd.DataFrame({"record_id": None, "judge": pd.Categorical.from_codes(category[judge], texts[order].tolist()),
                          "i": i.astype(np.int32), "j": j.astype(np.int32), "a": (a - 1).astype(np.int8),
                          "outcome": outcome.astype(np.int8), "self": i == j, **z_cols, "count": count}, copy=False)
    del i, j, a, outcome, count
    out = cls._build(canon, tuple(names), None, v.human_judge,
                     covariates=(scale, covariate_transform if scale is not None else None), drop_empty_judges=drop_empty_judges)
    report_changes(out, v)
    return out


def from_csv(cls: Any, path: str | PathLike[str], **kwargs: Any) -> Any:
    """Read a long-format CSV and pass it to :meth:`~pydial.Comparisons.from_frame`.

    Every column is read as text as written: item ``007`` stays ``"007"``, and ``NA`` / ``None`` are names; only an
    empty (or blank) cell is missing.  Keyword arguments are those of :meth:`~pydial.Comparisons.from_frame`; the
    others go to :func:`pandas.read_csv` (all of its keywords but ``chunksize`` and ``iterator``).

    Raises
    ------
    DataError
        The file cannot be read or is empty (also a truncated or corrupt gzip file), a column it needs is named
        twice in the header (pandas would read the first), or :meth:`~pydial.Comparisons.from_frame` refuses it.
    ArgumentTypeError
        A keyword argument of neither :meth:`~pydial.Comparisons.from_frame` nor :func:`pandas.read_csv`
        (e.g. a misspelt one, named with the likely intended keyword).
    """
    ours = {k: v for k, v in kwargs.items() if k in FRAME_KEYWORDS}
    theirs = {k: v for k, v in kwargs.items() if k not in FRAME_KEYWORDS}
    unknown_keywords("Comparisons.from_csv", theirs, CSV_KEYWORDS | FRAME_KEYWORDS,
                     f"those of from_frame ({', '.join(sorted(FRAME_KEYWORDS))}) and of pandas.read_csv except "
                     f"{sorted(CSV_REFUSED)}")
    return cls.from_frame(read_csv(path, columns_to_read(ours), **theirs), **ours)


def from_parquet(cls: Any, path: str | PathLike[str], **kwargs: Any) -> Any:
    """Read a long-format Parquet file and pass it to :meth:`~pydial.Comparisons.from_frame`.

    Only the columns needed are read (keyword arguments: those of :meth:`~pydial.Comparisons.from_frame`).  For a
    file too large to hold row by row use :func:`pydial.read_comparisons` (chunk by chunk).

    Raises
    ------
    DataError
        The file cannot be read or lacks a column, or :meth:`~pydial.Comparisons.from_frame` refuses it.
    MemoryLimitError
        The rows would not fit in the memory available.
    """
    unknown_keywords("Comparisons.from_parquet", kwargs, FRAME_KEYWORDS,
                     f"those of from_frame: {', '.join(sorted(FRAME_KEYWORDS))}")
    cols = columns_to_read(kwargs)
    return cls.from_frame(read_parquet(path, cols, frame_bytes(1, (len(cols) - len(COLUMNS)) // 2)), **kwargs)


def columns_to_read(kwargs: Mapping[str, Any]) -> list[str]:
    """Check the name arguments of ``from_frame`` keywords ``kwargs`` before a file is read; return the columns needed."""
    name_arguments(kwargs.get("items"), kwargs.get("self_preference"))
    names = kwargs.get("covariates")
    return list(column_names(kwargs.get("columns")).values()) + covariate_sides(
        None if names is None else covariate_names(names))
