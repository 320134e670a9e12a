"""Converters from common pairwise-judgment formats into pydial's long format.

Every converter returns ``(frame, report)``: ``frame`` has the columns ``record_id, judge, item_a, item_b, first,
winner`` of :meth:`pydial.Comparisons.from_frame`; ``report`` (a :class:`ConversionReport`) says how many records
were read, kept and excluded, and why.
"""

from __future__ import annotations

import gzip
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pandas as pd

from pydial.data.files import read_csv, reading
from pydial.data.ingest import COLUMNS, check_columns
from pydial.exceptions import ArgumentError, DataError

ARENA_WINNERS = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "both_bad"}
MTBENCH_WINNERS = {"model_1": "a", "model_2": "b", "tie": "tie"}
PANDALM_WINNERS = {1: "a", 2: "b", 0: "tie"}


@dataclass
class ConversionReport:
    """What a converter read, kept and excluded.

    Attributes
    ----------
    source : str
        Format name.
    read : int
        Input records read.
    kept : int
        Long-format rows written.
    excluded : dict
        Excluded input records by reason.
    notes : list of str
        Assumptions the converter made (e.g. display order).
    """

    source: str
    read: int = 0
    kept: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def exclude(self, reason: str, count: int) -> None:
        """Count ``count`` excluded input records under ``reason``."""
        if count:
            self.excluded[reason] = self.excluded.get(reason, 0) + int(count)

    def __str__(self) -> str:
        """Summarize rows read, kept and excluded (by reason), then the notes."""
        ex = ", ".join(f"{k}: {v}" for k, v in self.excluded.items()) or "none"
        return "\n".join([f"{self.source}: read {self.read}, kept {self.kept} rows, excluded {ex}",
                          *(f"note: {n}" for n in self.notes)])


GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"


def file_kind(path: Path) -> str:
    """Return what ``path`` holds by its first bytes: ``"parquet"``, ``"gzip"`` or ``"text"`` (unopenable: :class:`DataError`)."""
    with reading(path), open(path, "rb") as fh:
        head = fh.read(4)
    return "parquet" if head == PARQUET_MAGIC else "gzip" if head[:2] == GZIP_MAGIC else "text"


@contextmanager
def reading_text(path: Path, what: str) -> Iterator[None]:
    """:func:`pydial.data.files.reading` for a text file of ``what`` (e.g. ``"JSON lines"``), naming non-UTF-8 text."""
    with reading(path):
        try:
            yield
        except (UnicodeDecodeError, DataError) as e:  # a reader of pydial.data.files wraps it in a DataError
            cause = e if isinstance(e, UnicodeDecodeError) else e.__cause__
            if not isinstance(cause, UnicodeDecodeError):
                raise
            raise not_utf8(path, what, cause.reason, _first_undecodable_line(path)) from None


def not_utf8(path: Path, what: str, reason: str, line: int | None = None) -> DataError:
    """Return the :class:`DataError` of a file whose text is not UTF-8, naming the file, the line and the remedy."""
    return DataError(f"cannot read {path!s}: it is not UTF-8 text ({reason}{f' on line {line}' if line else ''}); "
                     f"{what} must be UTF-8: re-encode the file (e.g. iconv -f latin1 -t utf-8)")


def _first_undecodable_line(path: Path) -> int | None:
    """Return the number of the first line of ``path`` (gzip-compressed or not) that is not UTF-8; ``None`` if unknown."""
    try:
        with (gzip.open if file_kind(path) == "gzip" else open)(path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return n
    except (OSError, EOFError, DataError):
        return None
    return None


def read_jsonl(path: str | PathLike[str]) -> pd.DataFrame:
    """Read a JSON-lines file (plain, or gzip-compressed whatever its name), one JSON object per line.

    Raises
    ------
    DataError
        The file is missing, empty, a truncated or corrupt gzip stream, not UTF-8 text, or has a line that is not a
        JSON object (naming the file and the line).
    """
    p = Path(path)
    opener: Any = gzip.open if file_kind(p) == "gzip" else open
    rows = []
    with reading_text(p, "JSON lines"), opener(p, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{p}:{n} is not JSON ({e.msg} at column {e.colno}); a JSON-lines file holds one JSON "
                                "object per line") from None
            if not isinstance(row, dict):
                raise DataError(f"{p}:{n} is a JSON {type(row).__name__}, not an object; a JSON-lines file holds one "
                                "JSON object per line")
            rows.append(row)
    if not rows:
        raise DataError(f"cannot read {p}: the file is empty (no JSON line)")
    return pd.DataFrame(rows)


def read_json(path: str | PathLike[str]) -> pd.DataFrame:
    """Read a JSON file of records with :func:`pandas.read_json`; an unreadable or non-JSON file is a :class:`DataError`."""
    p = Path(path)
    compression = "gzip" if file_kind(p) == "gzip" else "infer"  # gzip whatever the name; others by the name
    with reading_text(p, "JSON"):
        try:
            return pd.read_json(p, compression=compression)
        except ValueError as e:
            if isinstance(e, UnicodeDecodeError):
                raise
            raise DataError(f"cannot read {p}: it is not a JSON table of records (pandas: {e}); a JSON-lines file "
                            "must be named .jsonl or .jsonl.gz") from None


def _table(src: Any, rep: ConversionReport, cols: Iterable[str], what: str, reader: Any = read_jsonl) -> pd.DataFrame:
    """Return the table ``src`` (a path is read by ``reader``), its rows counted in ``rep.read``; a missing column raises."""
    df = src if isinstance(src, pd.DataFrame) else reader(src)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        where = "" if isinstance(src, pd.DataFrame) else f" ({src})"
        raise DataError(f"{what}{where}: missing column(s) {missing}; found {list(df.columns)}")
    rep.read += len(df)
    return df


def _long_rows(keep: pd.Series, record_id: pd.Series, judge: str | pd.Series, item_a: pd.Series, item_b: pd.Series,
               first: str, winner: pd.Series) -> pd.DataFrame:
    """Return the rows ``keep`` in the long format ``record_id, judge, item_a, item_b, first, winner`` (names as text)."""
    return pd.DataFrame({
        "record_id": record_id[keep].astype(str).to_numpy(),
        "judge": judge if isinstance(judge, str) else judge[keep].astype(str).to_numpy(),
        "item_a": item_a[keep].astype(str).to_numpy(), "item_b": item_b[keep].astype(str).to_numpy(),
        "first": first, "winner": winner[keep].to_numpy(),
    })[list(COLUMNS)]


def from_arena(judges: Mapping[str, str | PathLike[str] | pd.DataFrame], *, human_judge: str = "human",
               first: str = "a", record_id: str = "question_id") -> tuple[pd.DataFrame, ConversionReport]:
    """Chatbot Arena battles (``model_a, model_b, winner``), one table per judge.

    Parameters
    ----------
    judges : mapping
        Judge name -> JSONL path (``.jsonl`` or ``.jsonl.gz``) or DataFrame with columns ``question_id, model_a,
        model_b, winner``; the human labels are the entry named ``human_judge``.
    first : {"a", "b"}
        Which response the LLM judges saw first.  The Arena/MT-Bench judge prompt shows model_a as "Assistant A",
        so the default is ``"a"``; this is an assumption about the source and is stated in the report.
    record_id : str
        Column identifying the battle (shared across judges).

    Winner values ``model_a | model_b | tie | tie (bothbad)`` map to ``a | b | tie | both_bad``; any other value
    is excluded and counted.
    """
    if first not in ("a", "b"):
        raise ArgumentError(f"first must be 'a' or 'b', got {first!r}")
    rep = ConversionReport("Chatbot Arena")
    rep.notes.append(f"LLM judges assumed to see model_{first} first (display order is not stored in the source)")
    parts = []
    for name, src in judges.items():
        df = _table(src, rep, (record_id, "model_a", "model_b", "winner"), f"arena table of judge {name!r}")
        w = df["winner"].map(ARENA_WINNERS)
        rep.exclude(f"unknown winner ({name})", int(w.isna().sum()))
        parts.append(_long_rows(w.notna(), df[record_id], name, df["model_a"], df["model_b"], first, w))
    frame = pd.concat(parts, ignore_index=True)
    rep.kept = len(frame)
    if human_judge not in judges:
        rep.notes.append(f"no table named {human_judge!r}: the data have no human labels")
    return frame, rep


def from_mtbench(df: pd.DataFrame | str | PathLike[str]) -> tuple[pd.DataFrame, ConversionReport]:
    """MT-Bench pairwise judgments with both display orders.

    Each record (``question_id, model_1, model_2, g1_winner, g2_winner, judge`` and optionally ``turn``) holds
    two games: game 1 shows ``model_1`` first, game 2 shows ``model_2`` first; both winners name ``model_1`` /
    ``model_2`` / ``tie``.  A game whose verdict is ``error`` (or anything else) is excluded and counted.  The
    record id is ``question_id`` (with ``turn`` appended when present).
    """
    rep = ConversionReport("MT-Bench pairwise")
    t = _table(df, rep, ("question_id", "model_1", "model_2", "g1_winner", "g2_winner", "judge"), "MT-Bench table")
    rid = t["question_id"].astype(str)
    if "turn" in t.columns:
        rid = rid + "-t" + t["turn"].astype(str)
    judge = t["judge"].map(lambda j: j if isinstance(j, str) else "-".join(map(str, j)))
    parts = []
    for game, first in (("g1_winner", "a"), ("g2_winner", "b")):
        w = t[game].map(MTBENCH_WINNERS)
        bad = w.isna()
        errors = int((t[game].astype(str) == "error").sum())
        rep.exclude(f"{game} error verdicts", errors)
        rep.exclude(f"{game} other verdicts", int(bad.sum()) - errors)
        parts.append(_long_rows(~bad, rid, judge, t["model_1"], t["model_2"], first, w))
    frame = pd.concat(parts, ignore_index=True)
    rep.kept = len(frame)
    return frame, rep


def from_pandalm(df: pd.DataFrame | str | PathLike[str], *, judge: str = "judge", model_1: str = "model1",
                 model_2: str = "model2", label: str = "label", record_id: str = "question_id",
                 first: str = "a") -> tuple[pd.DataFrame, ConversionReport]:
    """Convert PandaLM-style records to the long format.

    Label ``1`` (response 1 better), ``2`` (response 2 better), ``0`` (tie); other labels are excluded and counted.
    Column names are mapped by keyword; a missing ``judge`` column makes every row the judge named by the ``judge``
    argument.  ``first`` says which response was shown first (PandaLM's original order shows response 1 first).
    """
    rep = ConversionReport("PandaLM")
    jsonl = isinstance(df, pd.DataFrame) or str(df).endswith((".jsonl", ".jsonl.gz"))
    t = _table(df, rep, (model_1, model_2, label, record_id), "PandaLM table", read_jsonl if jsonl else read_json)
    lab = pd.to_numeric(t[label], errors="coerce").map(PANDALM_WINNERS)
    bad = lab.isna()
    rep.exclude("unknown label", int(bad.sum()))
    frame = _long_rows(~bad, t[record_id], t[judge] if judge in t.columns else judge, t[model_1], t[model_2], first, lab)
    rep.kept = len(frame)
    return frame, rep


def from_table(path: str | PathLike[str], *, columns: Mapping[str, str] | None = None,
               **read_kwargs: Any) -> tuple[pd.DataFrame, ConversionReport]:
    """Read a generic CSV or Parquet in the long format.

    ``columns`` maps pydial's names (``record_id, judge, item_a, item_b, first, winner``) to the file's.  A Parquet
    file is recognized by its content (it starts with ``PAR1``); any other file is read as a UTF-8 CSV (gzip whatever
    its name, other compressions by the name) with every column as text as written, so names such as ``007`` or
    ``NA`` pass through unchanged (only a blank cell is missing).  ``read_kwargs`` go to :func:`pandas.read_parquet`
    or :func:`pandas.read_csv`.

    Raises
    ------
    DataError
        The file is missing, empty, truncated or corrupt, not UTF-8 text, lacks a column of ``columns`` or has one
        of them more than once (naming the file).
    """
    p = Path(path)
    rep = ConversionReport(f"table {p.name}")
    names = [(columns or {}).get(k, k) for k in COLUMNS]
    kind = file_kind(p)
    if kind == "parquet":
        import pyarrow.parquet as pq

        with reading(p):
            check_columns(pq.read_schema(p).names, names, str(p))
            t = pd.read_parquet(p, **read_kwargs)
    else:
        with reading_text(p, "a CSV file"):
            t = read_csv(p, names, **{"compression": "gzip" if kind == "gzip" else "infer", **read_kwargs})
    frame = _table(t, rep, names, f"table {p}")[names].set_axis(list(COLUMNS), axis=1)
    rep.kept = len(frame)
    return frame, rep
