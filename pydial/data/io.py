"""Converters from common pairwise-judgment formats into pydial's long format.

Every converter returns ``(frame, report)``: ``frame`` has the columns
``record_id, judge, item_a, item_b, first, winner`` accepted by
:meth:`pydial.Comparisons.from_frame`, and ``report`` (a :class:`ConversionReport`)
says how many records were read, kept and excluded, and why.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from pydial.data.comparisons import COLUMNS
from pydial.data.files import reading
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
        lines = [f"{self.source}: read {self.read}, kept {self.kept} rows, excluded {ex}"]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def read_jsonl(path: str | PathLike[str]) -> pd.DataFrame:
    """Read a JSON-lines file (optionally gzip-compressed)."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"cannot read {p}: {e}") from e
    return pd.DataFrame(rows)


def _require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"{what}: missing column(s) {missing}; found {list(df.columns)}")


def from_arena(
    judges: Mapping[str, str | PathLike[str] | pd.DataFrame],
    *,
    human_judge: str = "human",
    first: str = "a",
    record_id: str = "question_id",
) -> tuple[pd.DataFrame, ConversionReport]:
    """Chatbot Arena battles (``model_a, model_b, winner``), one table per judge.

    Parameters
    ----------
    judges : mapping
        Judge name -> JSONL path (``.jsonl`` or ``.jsonl.gz``) or DataFrame with
        columns ``question_id, model_a, model_b, winner``; the human labels are the
        entry named ``human_judge``.
    first : {"a", "b"}
        Which response the LLM judges saw first.  The Arena/MT-Bench judge prompt shows
        model_a as "Assistant A", so the default is ``"a"``; this is an assumption about
        the source and is stated in the report.
    record_id : str
        Column identifying the battle (shared across judges).

    Winner values ``model_a | model_b | tie | tie (bothbad)`` map to
    ``a | b | tie | both_bad``; any other value is excluded and counted.
    """
    if first not in ("a", "b"):
        raise ArgumentError(f"first must be 'a' or 'b', got {first!r}")
    rep = ConversionReport("Chatbot Arena")
    rep.notes.append(f"LLM judges assumed to see model_{first} first (display order is not stored in the source)")
    parts = []
    for name, src in judges.items():
        df = src if isinstance(src, pd.DataFrame) else read_jsonl(src)
        _require(df, (record_id, "model_a", "model_b", "winner"), f"arena table of judge {name!r}")
        rep.read += len(df)
        w = df["winner"].map(ARENA_WINNERS)
        rep.exclude(f"unknown winner ({name})", int(w.isna().sum()))
        keep = w.notna()
        out = pd.DataFrame({
            "record_id": df.loc[keep, record_id].astype(str).to_numpy(),
            "judge": name,
            "item_a": df.loc[keep, "model_a"].astype(str).to_numpy(),
            "item_b": df.loc[keep, "model_b"].astype(str).to_numpy(),
            "first": first,
            "winner": w[keep].to_numpy(),
        })
        parts.append(out)
    frame = pd.concat(parts, ignore_index=True)[list(COLUMNS)]
    rep.kept = len(frame)
    if human_judge not in judges:
        rep.notes.append(f"no table named {human_judge!r}: the data have no human labels")
    return frame, rep


def from_mtbench(df: pd.DataFrame | str | PathLike[str]) -> tuple[pd.DataFrame, ConversionReport]:
    """MT-Bench pairwise judgments with both display orders.

    Each record (``question_id, model_1, model_2, g1_winner, g2_winner, judge`` and
    optionally ``turn``) holds two games: game 1 shows ``model_1`` first, game 2 shows
    ``model_2`` first; both winners name ``model_1`` / ``model_2`` / ``tie``.  A game
    whose verdict is ``error`` (or anything else) is excluded and counted.  The record
    id is ``question_id`` (with ``turn`` appended when present).
    """
    rep = ConversionReport("MT-Bench pairwise")
    t = df if isinstance(df, pd.DataFrame) else read_jsonl(df)
    _require(t, ("question_id", "model_1", "model_2", "g1_winner", "g2_winner", "judge"), "MT-Bench table")
    rep.read = len(t)
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
        parts.append(pd.DataFrame({
            "record_id": rid[~bad].to_numpy(), "judge": judge[~bad].to_numpy(),
            "item_a": t.loc[~bad, "model_1"].astype(str).to_numpy(), "item_b": t.loc[~bad, "model_2"].astype(str).to_numpy(),
            "first": first, "winner": w[~bad].to_numpy(),
        }))
    frame = pd.concat(parts, ignore_index=True)[list(COLUMNS)]
    rep.kept = len(frame)
    return frame, rep


def from_pandalm(
    df: pd.DataFrame | str | PathLike[str],
    *,
    judge: str = "judge",
    model_1: str = "model1",
    model_2: str = "model2",
    label: str = "label",
    record_id: str = "question_id",
    first: str = "a",
) -> tuple[pd.DataFrame, ConversionReport]:
    """Convert PandaLM-style records to the long format.

    Label ``1`` (response 1 better), ``2`` (response 2 better), ``0`` (tie); other labels
    are excluded and counted.

    Column names are mapped by keyword; a missing ``judge`` column makes every row the
    judge named by the ``judge`` argument.  ``first`` says which response was shown
    first (PandaLM's original order shows response 1 first).
    """
    rep = ConversionReport("PandaLM")
    if isinstance(df, pd.DataFrame):
        t = df
    else:
        t = read_jsonl(df) if str(df).endswith((".jsonl", ".jsonl.gz")) else pd.read_json(df)
    _require(t, (model_1, model_2, label, record_id), "PandaLM table")
    rep.read = len(t)
    lab = pd.to_numeric(t[label], errors="coerce").map(PANDALM_WINNERS)
    bad = lab.isna()
    rep.exclude("unknown label", int(bad.sum()))
    jcol = t[judge].astype(str) if judge in t.columns else pd.Series(judge, index=t.index)
    frame = pd.DataFrame({
        "record_id": t.loc[~bad, record_id].astype(str).to_numpy(), "judge": jcol[~bad].to_numpy(),
        "item_a": t.loc[~bad, model_1].astype(str).to_numpy(), "item_b": t.loc[~bad, model_2].astype(str).to_numpy(),
        "first": first, "winner": lab[~bad].to_numpy(),
    })[list(COLUMNS)]
    rep.kept = len(frame)
    return frame, rep


def from_table(
    path: str | PathLike[str], *, columns: Mapping[str, str] | None = None, **read_kwargs: Any
) -> tuple[pd.DataFrame, ConversionReport]:
    """Read a generic CSV or Parquet in the long format.

    ``columns`` maps pydial's names (``record_id, judge, item_a, item_b, first, winner``)
    to the file's.

    A CSV is read as text exactly as written (``dtype=str``, ``keep_default_na=False``
    unless given in ``read_kwargs``), so names such as ``007`` or ``NA`` pass through
    unchanged (see :mod:`pydial.data.names`).
    """
    p = Path(path)
    rep = ConversionReport(f"table {p.name}")
    with reading(p):
        if p.suffix == ".parquet":
            t = pd.read_parquet(p, **read_kwargs)
        else:
            t = pd.read_csv(p, **{"dtype": str, "keep_default_na": False, **read_kwargs})
    mapping = {k: (columns or {}).get(k, k) for k in COLUMNS}
    _require(t, mapping.values(), f"table {p.name}")
    rep.read = len(t)
    frame = t[list(mapping.values())].copy()
    frame.columns = list(COLUMNS)
    rep.kept = len(frame)
    return frame, rep
