"""Reading a judge panel's collection: one JSON line per (record, judge, display order).

The released collection of the DIAL paper (App. "Real Data", "Datasets and collection")
stores each study as ``<study>/results/<judge>/responses.jsonl``.  Each line is one
judge's verdict on one record in one display order::

    {"record_id": ..., "model_a": ..., "model_b": ..., "human_winner": "model_b",
     "judge": ..., "response_order_default": true, "choice": "b",
     "canonical_verdict": "model_b", ...}

``response_order_default`` is true when ``model_a``'s response was shown first;
``choice`` is the letter the judge answered (``a`` the response shown first, ``b`` the
second, ``c`` a tie, ``d`` both bad) and ``canonical_verdict`` the same verdict mapped back
to ``model_a`` / ``model_b`` / ``tie`` / ``both_bad``.  ``human_winner`` is the record's
human label, repeated on every line of the record.

:func:`read_judge_responses` streams such files (a file, a folder, or a list of them;
plain or gzip) a block of lines at a time, keeps only small integer codes per line, applies
the panel rules and returns a :class:`~pydial.Comparisons` with record ids: ``item_a`` is
``model_a``, ``item_b`` is ``model_b``, ``first`` is ``"a"`` when ``model_a`` was shown
first, the winner comes from the canonical verdict, and each record contributes one human
row from its ``human_winner``.  Every line left out is counted in
:meth:`Comparisons.summary` (rows starting with ``panel:``) and per judge in
:func:`panel_counts`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from pydial.data.comparisons import BOTH_BAD as CANON_BOTH_BAD
from pydial.data.comparisons import I_WINS, J_WINS, Comparisons
from pydial.data.comparisons import TIE as CANON_TIE
from pydial.data.files import reading
from pydial.data.ingest import WINNER_VALUES, duplicated, group, pack, unpack
from pydial.data.io import file_kind, not_utf8
from pydial.resources import check_count, check_fraction
from pydial.exceptions import ArgumentError, DataError, OutputError

__all__ = ["PANEL_FIELDS", "VERDICT_LABELS", "CHOICE_LABELS", "ORDER_LABELS", "panel_files", "read_judge_responses",
           "panel_counts", "write_judge_responses", "CANONICAL_VERDICTS"]

PANEL_FIELDS: dict[str, str] = {
    "record_id": "record_id",
    "judge": "judge",
    "item_a": "model_a",
    "item_b": "model_b",
    "order": "response_order_default",
    "verdict": "canonical_verdict",
    "human": "human_winner",
    "choice": "choice",
}
"""pydial's field -> the JSON key of the released format (override some with ``fields=``).

``order`` says which response was shown first (see ``ORDER_LABELS``); ``verdict`` and
``human`` hold ``VERDICT_LABELS`` values; ``choice`` (optional: a key absent from every line
is not used) holds ``CHOICE_LABELS`` values and is checked against the verdict.
"""

VERDICT_LABELS: dict[str, str] = {"model_a": "a", "model_b": "b", "tie": "tie", "both_bad": "both_bad"}
"""Verdict / human label as written -> pydial's winner (``item_a`` wins ``"a"``, ``item_b`` wins ``"b"``)."""

CHOICE_LABELS: dict[str, str] = {"a": "first", "b": "second", "c": "tie", "d": "both_bad"}
"""The judge's answer as written -> the response it names (by display position)."""

ORDER_LABELS: dict[Any, str] = {True: "a", False: "b"}
"""Display-order value as written -> the item shown first (``"a"``: ``item_a``)."""

BLOCK_LINES = 50_000
"""Lines parsed at a time (one pyarrow read per block)."""

# Verdict codes: index into WINNER_VALUES (a, b, tie, both_bad); -1 missing or unparseable.
UNPARSED = -1
TIE, BOTH_BAD = WINNER_VALUES.index("tie"), WINNER_VALUES.index("both_bad")
LISTED = 5  # examples named in a summary row


# ------------------------------------------------------------------ files
def panel_files(source: str | PathLike[str] | Iterable[str | PathLike[str]]) -> list[Path]:
    """Return the response files of ``source``: a file, a folder, or a list of files and folders.

    In a folder (searched recursively) the files named ``responses.jsonl`` or
    ``responses.jsonl.gz`` are taken when there are any (the released layout
    ``results/<judge>/responses.jsonl``, next to which ``errors.jsonl`` holds failed
    queries); otherwise every ``*.jsonl`` and ``*.jsonl.gz`` file.

    Raises
    ------
    DataError
        A path that does not exist, or a folder without such files.
    """
    items = [source] if isinstance(source, (str, PathLike)) else list(source)
    if not items:
        raise DataError("no response files given")
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            found = sorted(q for q in p.rglob("responses.jsonl*") if q.name in ("responses.jsonl", "responses.jsonl.gz"))
            found = found or sorted(q for q in p.rglob("*") if q.name.endswith((".jsonl", ".jsonl.gz")))
            if not found:
                raise DataError(f"{p} holds no responses.jsonl and no other *.jsonl or *.jsonl.gz file; pass a "
                                "file, or a folder of the released layout <study>/results/<judge>/responses.jsonl")
            out += found
        else:
            raise DataError(f"{p} does not exist")
    return list(dict.fromkeys(out))


def _open(path: Path) -> Any:
    """Open ``path`` for reading bytes, decompressing a gzip file whatever its name."""
    return gzip.open(path, "rb") if file_kind(path) == "gzip" else open(path, "rb")


def _line_blocks(path: Path, size: int) -> Iterator[list[bytes]]:
    """Yield the non-blank lines of ``path``, ``size`` at a time."""
    with _open(path) as fh:
        lines: list[bytes] = []
        for line in fh:
            if line.strip():
                lines.append(line)
                if len(lines) == size:
                    yield lines
                    lines = []
        if lines:
            yield lines


def line_numbers(path: Path, rows: np.ndarray) -> np.ndarray:
    """Return the 1-based line numbers in ``path`` of its non-blank lines number ``rows`` (1-based, ascending)."""
    out = np.zeros(rows.size, np.int64)
    t, row = 0, 0
    with reading(path), _open(path) as fh:
        for n, line in enumerate(fh, 1):
            if t == rows.size:
                break
            if line.strip():
                row += 1
                while t < rows.size and rows[t] == row:
                    out[t] = n
                    t += 1
    return out


# ------------------------------------------------------------------ parsing
def _schema(keys: Mapping[str, str], order_labels: Mapping[Any, str]) -> Any:
    import pyarrow as pa

    boolean = all(isinstance(k, (bool, np.bool_)) for k in order_labels)
    return pa.schema([(key, pa.bool_() if name == "order" and boolean else pa.string()) for name, key in keys.items()])


def _parse_file(path: Path, keys: Mapping[str, str], schema: Any, block_lines: int
                ) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    """Yield blocks of the file's columns (object arrays) and a mask of the lines that are not JSON objects.

    pyarrow parses the file (only the fields of ``keys``, a block of bytes at a time); a file
    pyarrow refuses (a malformed line, a value of another JSON type, text that is not UTF-8)
    is parsed again line by line with :mod:`json`, ``block_lines`` lines at a time.
    """
    import pyarrow as pa
    import pyarrow.json as pj

    with reading(path):
        try:
            reader = pj.open_json(path, read_options=pj.ReadOptions(block_size=8 << 20), parse_options=pj.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"))
            batches = list(reader)
            for b in batches:
                b.validate(full=True)  # text that is not UTF-8: found, with its line, by the line-by-line parse
        except pa.ArrowInvalid:
            batches = None
        if batches is not None:
            for b in batches:
                yield {name: b.column(key).to_numpy(zero_copy_only=False) for name, key in keys.items()}, np.zeros(
                    b.num_rows, bool)
            return
        row = 0
        for lines in _line_blocks(path, block_lines):
            yield _parse_lines(lines, keys, path, row)
            row += len(lines)


def _parse_lines(lines: list[bytes], keys: Mapping[str, str], path: Path, start: int
                 ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Parse one line at a time: a line that is not a JSON object is marked bad.

    ``path`` and ``start`` (the non-blank lines of ``path`` before ``lines``) locate a line
    that is not UTF-8 text, which raises :class:`DataError`.
    """
    rows: list[Mapping[str, Any]] = []
    bad = np.zeros(len(lines), bool)
    for t, line in enumerate(lines):
        try:
            row = json.loads(line)
        except UnicodeDecodeError as e:
            at = int(line_numbers(path, np.array([start + t + 1]))[0])
            raise not_utf8(path, "a judge-response file", e.reason, at) from None
        except ValueError:
            row = None
        if not isinstance(row, dict):
            bad[t] = True
            row = {}
        rows.append(row)
    cols = {}
    for name, key in keys.items():
        col = np.empty(len(rows), object)
        col[:] = [r.get(key) for r in rows]
        cols[name] = col
    return cols, bad


class Vocabulary:
    """Codes of the distinct values of a column across blocks (``-1`` for a missing value)."""

    def __init__(self, text: bool = True) -> None:
        self.index: dict[Any, int] = {}
        self.text = text

    def codes(self, values: np.ndarray) -> np.ndarray:
        """Return the int32 codes of ``values`` (names as text: ``5 -> "5"``)."""
        local, uniq = pd.factorize(values, use_na_sentinel=True)
        lut = np.empty(len(uniq) + 1, np.int32)
        lut[-1] = -1
        for t, v in enumerate(uniq):
            if self.text and not isinstance(v, str):
                v = str(v)
            lut[t] = self.index.setdefault(v, len(self.index))
        return lut[local]

    @property
    def values(self) -> list[Any]:
        """The distinct values in code order."""
        return list(self.index)


def _label_codes(values: np.ndarray, labels: Mapping[Any, str], outcomes: Sequence[str], *,
                 text: bool = True) -> np.ndarray:
    """Codes (index into ``outcomes``) of ``values`` through ``labels``; -1 missing, -2 not a label."""
    local, uniq = pd.factorize(values, use_na_sentinel=True)
    norm = {(k.strip().lower() if isinstance(k, str) else k): v for k, v in labels.items()}
    lut = np.full(len(uniq) + 1, -1, np.int8)
    for t, v in enumerate(uniq):
        key = v.strip().lower() if isinstance(v, str) and text else v
        hit = norm.get(key) if isinstance(key, (str, bool, np.bool_, int)) else None
        lut[t] = outcomes.index(hit) if hit in outcomes else -2
    return lut[local]


# --------------------------------------------------------------- the lines
@dataclass
class Lines:
    """Compact codes of every line read (one entry per non-blank line)."""

    file: list[np.ndarray] = field(default_factory=list)
    line: list[np.ndarray] = field(default_factory=list)  # ordinal of the non-blank line in its file (1-based)
    record_id: list[np.ndarray] = field(default_factory=list)
    judge: list[np.ndarray] = field(default_factory=list)
    item_a: list[np.ndarray] = field(default_factory=list)
    item_b: list[np.ndarray] = field(default_factory=list)
    first: list[np.ndarray] = field(default_factory=list)  # 0: item_a shown first, 1: item_b, -1 missing
    verdict: list[np.ndarray] = field(default_factory=list)
    human: list[np.ndarray] = field(default_factory=list)
    bad: list[np.ndarray] = field(default_factory=list)

    def stack(self) -> dict[str, np.ndarray]:
        """Concatenate the blocks: one array per field."""
        return {k: np.concatenate(v) for k, v in vars(self).items()}


def _where(lines: Mapping[str, np.ndarray], files: Sequence[Path], mask: np.ndarray) -> str:
    """Name the file and line number of the first ``LISTED`` lines of ``mask`` and how many in all."""
    at = np.flatnonzero(mask)
    shown = []
    for t in at[:LISTED]:
        path = files[lines["file"][t]]
        shown.append(f"{path.as_posix()}:{line_numbers(path, lines['line'][t:t + 1])[0]}")
    return f"{', '.join(shown)}{', ...' if at.size > LISTED else ''} ({at.size} line(s))"


def _verdicts(cols: Mapping[str, np.ndarray], first: np.ndarray, labels: Mapping[Any, str], files: Sequence[Path],
              where: Mapping[str, np.ndarray]) -> np.ndarray:
    """Winner codes of a block: the canonical verdict, or the choice mapped back when the verdict is missing.

    A verdict that contradicts the choice and display order raises :class:`DataError`.
    """
    verdict = _label_codes(cols["verdict"], labels, WINNER_VALUES)
    verdict[verdict == -2] = UNPARSED
    pos = _label_codes(cols["choice"], CHOICE_LABELS, ("first", "second", "tie", "both_bad"))
    known = (pos >= 0) & (first >= 0)
    mapped = np.where(pos >= 2, pos, np.where((pos == 0) == (first == 0), 0, 1)).astype(np.int8)
    clash = known & (verdict >= 0) & (mapped != verdict)
    if clash.any():
        raise DataError(f"the verdict contradicts the choice and display order at {_where(where, files, clash)}")
    return np.where((verdict < 0) & known, mapped, verdict).astype(np.int8)


# ------------------------------------------------------------- the reader
@dataclass
class PanelRules:
    """The panel rules of a read and what each removed (see :func:`read_judge_responses`)."""

    max_tie_rate: float | None
    require_both_orders: bool
    rows: dict[str, Any] = field(default_factory=dict)
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_judge_responses(
    source: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    max_tie_rate: float | None = None,
    require_both_orders: bool = False,
    human_judge: str = "human",
    items: Sequence[str] | None = None,
    drop_empty_judges: bool = False,
    fields: Mapping[str, str] | None = None,
    verdict_labels: Mapping[str, str] | None = None,
    order_labels: Mapping[Any, str] | None = None,
    block_lines: int = BLOCK_LINES,
) -> Comparisons:
    """Read a judge panel's responses (the released DIAL collection format) into :class:`~pydial.Comparisons`.

    Parameters
    ----------
    source : path, or iterable of paths
        A ``responses.jsonl`` file (or ``.jsonl.gz``), a folder (see :func:`panel_files`:
        ``<study>/results`` with one sub-folder per judge, or a folder of files), or a
        list of files and folders.
    max_tie_rate : float, optional
        Panel rule: exclude every judge whose tie rate (ties / usable verdicts) exceeds it.
        The paper excludes StableLM 2 (12B) because its tie rate exceeds 0.5 on every
        dataset (``max_tie_rate=0.5``).  Default: keep every judge.
    require_both_orders : bool, default False
        Panel rule: keep a judge's verdicts on a record only when the judge gave a usable
        verdict in both display orders.  Either way the records judged in one order only
        are counted.
    human_judge : str, default "human"
        The judge name of the human rows (one per record with a label).
    items : sequence of str, optional
        Item order, as in :meth:`~pydial.Comparisons.from_frame`.
    drop_empty_judges : bool, default False
        As in :meth:`~pydial.Comparisons.from_frame`: a judge whose kept verdicts are all
        ties or "both bad" raises :class:`DataError` unless this is ``True``.
    fields : mapping, optional
        JSON keys of a similar format: pydial's field -> key, overriding some of
        :data:`PANEL_FIELDS` (``record_id, judge, item_a, item_b, order, verdict, human,
        choice``), e.g. ``{"item_a": "left", "item_b": "right", "verdict": "winner"}``.
        ``choice`` is optional (not checked when no line has it).
    verdict_labels : mapping, optional
        Values of the verdict and human fields -> ``"a"`` (``item_a`` wins), ``"b"``,
        ``"tie"``, ``"both_bad"``; default :data:`VERDICT_LABELS`.  Text is matched
        ignoring letter case and surrounding whitespace.
    order_labels : mapping, optional
        Values of the order field -> the item shown first (``"a"`` or ``"b"``); default
        :data:`ORDER_LABELS` (``true``: ``item_a`` first).
    block_lines : int
        Lines parsed at a time; memory holds one block of text plus about 30 bytes per line.

    Returns
    -------
    Comparisons
        One LLM row per kept line and one human row per record with a human label.
        :meth:`~Comparisons.summary` reports, in rows starting with ``panel:``, what the read
        left out; :func:`panel_counts` gives the same counts per judge.

    Notes
    -----
    Left out and counted, in this order: lines that are not JSON objects; duplicate lines
    of one (record, judge, display order) (the first is kept); unparseable verdicts
    (missing, or not a verdict label, and no choice to map back); judges with no usable
    verdict; judges excluded by ``max_tie_rate``; verdicts on records the judge judged in one
    order only (only with ``require_both_orders``).  Records without a human label get no
    human row (counted).

    Raises
    ------
    DataError
        A missing or unreadable file (a truncated gzip stream, text that is not UTF-8); a file
        or folder without responses: empty, or no line a JSON object (e.g. a CSV table, named with
        what the reader expects); a line without a record id, judge, item or display
        order; an unknown display-order or human label; a verdict contradicting the choice
        and display order; two lines of one record with different items or human labels
        (naming the records); a judge named like ``human_judge``; no usable verdict at all.
    """
    keys, labels, orders = _options(fields, verdict_labels, order_labels, max_tie_rate, block_lines)
    files = panel_files(source)
    lines = _read(files, keys, labels, orders, block_lines)
    rec_vocab, judge_vocab, item_vocab = lines.pop("vocab")
    rules = PanelRules(max_tie_rate, require_both_orders)
    rules.rows["panel: files read"] = len(files)
    rules.rows["panel: lines read"] = int(lines["file"].size)
    if human_judge in judge_vocab.index:
        raise DataError(f"a panel judge is named {human_judge!r}, the name of the human rows; pass another human_judge=")
    ok = ~lines["bad"].astype(bool)
    values = _record_values(lines, ok, files, rec_vocab.values)
    keep = _apply_rules(lines, files, judge_vocab.values, rules)
    frame, no_label = _frame(lines, keep, rec_vocab.values, judge_vocab.values, item_vocab.values, human_judge, values)
    rules.rows["panel: records without a human label (no human row)"] = no_label
    out = Comparisons.from_frame(frame, human_judge=human_judge, items=items, drop_empty_judges=drop_empty_judges)
    out.frame.attrs["panel"] = rules.rows
    out.frame.attrs["panel_judges"] = rules.judges
    return out


def _options(fields: Mapping[str, str] | None, verdict_labels: Mapping[str, str] | None,
             order_labels: Mapping[Any, str] | None, max_tie_rate: float | None, block_lines: int
             ) -> tuple[dict[str, str], dict[Any, str], dict[Any, str]]:
    """Check the options of :func:`read_judge_responses`; return the keys and label maps."""
    unknown = sorted(set(fields or {}) - set(PANEL_FIELDS))
    if unknown:
        raise ArgumentError(f"fields= has unknown field(s) {unknown}; known: {list(PANEL_FIELDS)}")
    keys = {**PANEL_FIELDS, **(fields or {})}
    labels = dict(VERDICT_LABELS if verdict_labels is None else verdict_labels)
    orders = dict(ORDER_LABELS if order_labels is None else order_labels)
    for name, m, allowed in (("verdict_labels", labels, WINNER_VALUES), ("order_labels", orders, ("a", "b"))):
        bad = sorted({str(v) for v in m.values()} - set(allowed))
        if bad:
            raise ArgumentError(f"{name}= maps to {bad}; allowed: {list(allowed)}")
    if max_tie_rate is not None:
        check_fraction(max_tie_rate, "max_tie_rate")
    check_count(block_lines, "block_lines")
    return keys, labels, orders


def _read(files: Sequence[Path], keys: Mapping[str, str], labels: Mapping[Any, str], orders: Mapping[Any, str],
          block_lines: int) -> dict[str, Any]:
    """Stream every file into the codes of :class:`Lines`; return them with the three vocabularies."""
    schema = _schema(keys, orders)
    vocab = (Vocabulary(), Vocabulary(), Vocabulary())
    acc = Lines()
    for f, path in enumerate(files):
        row = objects = 0
        for cols, bad in _parse_file(path, keys, schema, block_lines):
            where: dict[str, np.ndarray] = {"file": np.full(bad.size, f, np.int32),
                                            "line": np.arange(row + 1, row + bad.size + 1)}
            row += bad.size
            objects += int(bad.size - bad.sum())
            _code_block(cols, bad, where, vocab, keys, labels, orders, files, acc)
        if not objects:
            _not_a_response_file(path, row, keys)
    out: dict[str, Any] = acc.stack()
    out["vocab"] = vocab
    return out


def _not_a_response_file(path: Path, lines: int, keys: Mapping[str, str]) -> None:
    """Raise :class:`DataError`: ``path`` (with ``lines`` non-blank lines) holds no JSON object, so no response."""
    expected = (f"read_judge_responses reads the released judge-response format: UTF-8 JSON lines, one object per "
                f"line with the keys {list(keys.values())} (pass fields= to name other keys)")
    if not lines:
        raise DataError(f"{path.as_posix()} is empty (no line but blank ones); {expected}. Remove the file or pass "
                        "the other files")
    with reading(path):
        first = next(_line_blocks(path, 1))[0][:60].decode("utf-8", "replace").strip()
    raise DataError(f"{path.as_posix()} is not a judge-response file: no line of it is a JSON object ({lines:,} "
                    f"non-blank line(s), the first starting {first!r}); {expected}. A table in pydial's long format "
                    "(columns record_id, judge, item_a, item_b, first, winner, e.g. written by `pydial simulate`) is "
                    "read by pydial.read_comparisons or `pydial fit`; other formats are converted by `pydial convert`")


def _code_block(cols: Mapping[str, np.ndarray], bad: np.ndarray, where: dict[str, np.ndarray],
                vocab: tuple[Vocabulary, Vocabulary, Vocabulary], keys: Mapping[str, str], labels: Mapping[Any, str],
                orders: Mapping[Any, str], files: Sequence[Path], acc: Lines) -> None:
    """Code one block of parsed lines into ``acc``; a line missing an identifying field raises :class:`DataError`."""
    rec, judge, item = vocab
    first = _label_codes(cols["order"], orders, ("a", "b"))
    codes = {"record_id": rec.codes(cols["record_id"]), "judge": judge.codes(cols["judge"]),
             "item_a": item.codes(cols["item_a"]), "item_b": item.codes(cols["item_b"]), "order": first}
    for name, c in codes.items():
        missing = (c < 0) & ~bad
        if missing.any():
            what = "an unknown display-order value" if name == "order" and (c == -2).any() else "no value"
            hint = "pass order_labels= to map the values" if what != "no value" else (
                "pass fields= to name the key of the " + name.replace("_", " ") + " if it has another name")
            raise DataError(f"{what} for {keys[name]!r} at {_where(where, files, missing)}; {hint}")
    human = _label_codes(cols["human"], labels, WINNER_VALUES)
    if (human == -2).any():
        vals = sorted({str(v) for v in cols["human"][human == -2]})[:LISTED]
        raise DataError(f"unknown human label(s) {vals} in {keys['human']!r} at "
                        f"{_where(where, files, human == -2)}; pass verdict_labels= to map them")
    verdict = _verdicts(cols, first, labels, files, where)
    verdict[bad] = UNPARSED
    del codes["order"]
    for name, value in (*codes.items(), ("first", first), ("verdict", verdict), ("human", human), ("bad", bad),
                        *where.items()):
        getattr(acc, name).append(value)


def _count_text(total: int, by_judge: np.ndarray, names: Sequence[str]) -> str:
    """``"12 (judge-x 10, judge-y 2)"``: a count and the judges with the largest non-zero counts."""
    top = [k for k in np.argsort(-by_judge, kind="stable")[:LISTED] if by_judge[k]]
    parts = [f"{names[k]} {int(by_judge[k])}" for k in top]
    more = int(np.count_nonzero(by_judge)) - len(top)
    return f"{total}" + (f" ({', '.join(parts)}{f', {more} more judges: panel_counts()' if more > 0 else ''})"
                         if parts else "")


def _record_values(lines: Mapping[str, np.ndarray], ok: np.ndarray, files: Sequence[Path], records: Sequence[str]
                   ) -> dict[str, np.ndarray]:
    """Per record: its items and human label (``-1`` none), the same on every line or :class:`DataError`."""
    rec = lines["record_id"][ok]
    R = len(records)
    out = {}
    for name in ("item_a", "item_b", "human"):
        v = lines[name][ok].astype(np.int64)
        present = v >= 0
        lo = np.full(R, np.iinfo(np.int64).max)
        hi = np.full(R, -1, np.int64)
        np.minimum.at(lo, rec[present], v[present])
        np.maximum.at(hi, rec[present], v[present])
        clash = np.flatnonzero((hi >= 0) & (lo != hi))
        if clash.size:
            what = "human labels" if name == "human" else "items"
            at = ok.copy()
            at[ok] = np.isin(rec, clash)
            shown = [records[r] for r in clash[:LISTED]]
            raise DataError(f"record(s) {shown}{' ...' if clash.size > LISTED else ''} ({clash.size} in all) have "
                            f"different {what} on different lines ({_where(lines, files, at)})")
        out[name] = hi
    return out


def _apply_rules(lines: dict[str, np.ndarray], files: Sequence[Path], judges: Sequence[str], rules: PanelRules
                 ) -> np.ndarray:
    """Mask of the kept lines; record in ``rules`` what each step left out (in total and per judge)."""
    K = len(judges)
    bad = lines["bad"].astype(bool)
    rules.rows["panel: lines that are not JSON objects (left out)"] = (
        f"{int(bad.sum())} at {_where(lines, files, bad)}" if bad.any() else 0)
    ok = ~bad
    R = int(lines["record_id"].max()) + 1 if ok.any() else 0
    jd, rec = lines["judge"], lines["record_id"]
    dup = np.zeros(ok.size, bool)
    dup[ok] = duplicated(pack([rec[ok], jd[ok], lines["first"][ok]], [R, K, 2]))
    usable = ok & ~dup & (lines["verdict"] >= 0)

    def per_judge(mask: np.ndarray) -> np.ndarray:
        return np.bincount(jd[mask], minlength=K)

    n_lines, n_dup, n_unp = per_judge(ok), per_judge(dup), per_judge(ok & ~dup & ~usable)
    n_use, n_tie = per_judge(usable), per_judge(usable & (lines["verdict"] == TIE))
    n_bb = per_judge(usable & (lines["verdict"] == BOTH_BAD))
    single, n_records = _one_order(rec[usable], jd[usable], R, K)
    n_single = np.bincount(jd[usable][single], minlength=K)
    tie_rate = n_tie / np.maximum(n_use, 1)
    empty = (n_lines > 0) & (n_use == 0)
    tied = (n_use > 0) & (tie_rate > rules.max_tie_rate) if rules.max_tie_rate is not None else np.zeros(K, bool)
    keep = usable & ~tied[jd]
    if rules.require_both_orders:
        keep[np.flatnonzero(usable)[single]] = False
    if not keep.any():
        raise DataError(f"no usable verdict in {len(files)} file(s) after the panel rules "
                        f"({int(ok.sum())} lines read, {int(usable.sum())} with a usable verdict)")
    n_kept = per_judge(keep)
    removed = (n_single if rules.require_both_orders else np.zeros(K, int)) * ~tied
    rows: dict[str, Any] = {
        "panel: duplicate lines of a (record, judge, order) (first kept)": _count_text(int(n_dup.sum()), n_dup, judges),
        "panel: unparseable verdicts (left out)": _count_text(int(n_unp.sum()), n_unp, judges),
        "panel: judges without a usable verdict (left out)": ", ".join(judges[int(k)] for k in np.flatnonzero(empty)) or "none",
    }
    if rules.max_tie_rate is not None:
        rows[f"panel: judges with tie rate > {rules.max_tie_rate} (left out)"] = ", ".join(
            f"{judges[int(k)]} ({tie_rate[k]:.3f} of {n_use[k]} verdicts)" for k in np.flatnonzero(tied)) or "none"
    rows["panel: records a judge judged in one order only"] = _count_text(int(n_single.sum()), n_single, judges)
    rows["panel: verdicts left out by require_both_orders"] = (int(removed.sum()) if rules.require_both_orders
                                                               else "- (rule off)")
    rows["panel: LLM verdicts kept"] = int(keep.sum())
    rules.rows.update(rows)
    for k in np.flatnonzero(n_lines):
        rules.judges[judges[int(k)]] = {
            "lines": int(n_lines[k]), "duplicates": int(n_dup[k]), "unparseable": int(n_unp[k]), "usable": int(n_use[k]),
            "ties": int(n_tie[k]), "both_bad": int(n_bb[k]), "tie_rate": float(tie_rate[k]) if n_use[k] else float("nan"),
            "records": int(n_records[k]), "one_order_records": int(n_single[k]), "kept": int(n_kept[k]),
            "excluded": "no usable verdict" if empty[k] else f"tie rate > {rules.max_tie_rate}" if tied[k] else ""}
    return keep


def _one_order(rec: np.ndarray, jd: np.ndarray, R: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Per usable line: whether its judge judged its record in one order only; and records per judge."""
    uk, inv = group(pack([rec, jd], [R, K], invertible=True))
    orders = np.bincount(inv, minlength=uk.size)
    return orders[inv] == 1, np.bincount(unpack(uk, [R, K])[1], minlength=K)


def _frame(lines: Mapping[str, np.ndarray], keep: np.ndarray, records: Sequence[str], judges: Sequence[str],
           items: Sequence[str], human_judge: str, values: Mapping[str, np.ndarray]) -> tuple[pd.DataFrame, int]:
    """Return the long table of the kept lines plus one human row per labelled record, and the unlabelled records."""
    rec_names = np.asarray(records, dtype=object)
    labelled = np.flatnonzero(values["human"] >= 0)
    seen = np.flatnonzero(values["item_a"] >= 0)
    n_llm = int(keep.sum())
    winners = np.asarray(WINNER_VALUES, dtype=object)

    def cat(codes: np.ndarray, names: Sequence[str]) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=list(names))

    first = np.empty(n_llm + labelled.size, object)
    first[:n_llm] = np.where(lines["first"][keep] == 0, "a", "b")
    frame = pd.DataFrame({
        "record_id": np.concatenate([rec_names[lines["record_id"][keep]], rec_names[labelled]]),
        "judge": cat(np.concatenate([lines["judge"][keep], np.full(labelled.size, len(judges))]),
                     [*judges, human_judge]),
        "item_a": cat(np.concatenate([lines["item_a"][keep], values["item_a"][labelled]]), items),
        "item_b": cat(np.concatenate([lines["item_b"][keep], values["item_b"][labelled]]), items),
        "first": first,
        "winner": np.concatenate([winners[lines["verdict"][keep]], winners[values["human"][labelled]]]),
    })
    return frame, int(seen.size - labelled.size)


def panel_counts(data: Comparisons) -> pd.DataFrame:
    """Per judge, what :func:`read_judge_responses` read and left out.

    Columns: ``lines`` (JSON objects read), ``duplicates`` (repeated (record, order) lines,
    first kept), ``unparseable``, ``usable`` (verdicts kept before the panel rules), ``ties``,
    ``both_bad``, ``tie_rate`` (ties / usable), ``records`` (records with a usable verdict),
    ``one_order_records`` (of them, judged in one order only), ``kept`` (verdicts in ``data``
    before :meth:`~pydial.Comparisons.from_frame`'s own rules) and ``excluded`` (the panel rule
    that removed the judge, or empty).

    Raises
    ------
    DataError
        ``data`` was not read by :func:`read_judge_responses`.
    """
    judges = data.frame.attrs.get("panel_judges")
    if judges is None:
        raise DataError("these data were not read by pydial.read_judge_responses (no panel counts)")
    return pd.DataFrame.from_dict(judges, orient="index").rename_axis("judge")


# ------------------------------------------------------------- the writer
CANONICAL_VERDICTS: dict[int, str] = {I_WINS: "model_a", J_WINS: "model_b", CANON_TIE: "tie", CANON_BOTH_BAD: "both_bad"}
"""Outcome code of a canonical row -> the verdict (and human label) as written."""


def write_judge_responses(data: Comparisons, folder: str | PathLike[str], *, overwrite: bool = False) -> Path:
    """Write judgments with record ids in the released collection format, one folder per judge.

    The inverse of :func:`read_judge_responses`: ``folder/<judge>/responses.jsonl`` holds
    one JSON line per (record, display order) of the judge, with ``record_id`` (as text),
    ``model_a`` / ``model_b`` (the record's items ``i < j``), ``human_winner`` (from the
    record's human row: ``model_a``, ``model_b``, ``tie``, ``both_bad``, or ``null``
    without one), ``judge`` and ``judge_model`` (the judge's name), ``condition_id``
    (``original_anonymous`` when ``model_a`` is shown first, else ``swapped_anonymous``),
    ``response_order_default``, ``displayed_a_original_side`` /
    ``displayed_b_original_side``, ``query_index`` (0), ``choice`` (``a`` the response shown
    first, ``b`` the second, ``c`` a tie, ``d`` both bad), ``canonical_verdict`` and
    ``confidence`` / ``raw_response`` (``null``).  Hence
    ``read_judge_responses(write_judge_responses(data, folder), items=data.items)`` gives
    the same judgments (record ids as text).

    Parameters
    ----------
    data : Comparisons
        Judgments row by row with record ids (not aggregated counts).  Each record has one
        item pair, at most one human label and at most one verdict per judge and display
        order, and every labelled record has an LLM verdict.  Every row of ``data.frame`` is
        written, including those ``from_frame`` excluded (ties, "both bad", self-comparisons,
        dropped judges); covariates are not (the format has no field for them).
    folder : path
        The folder to write (the released ``<study>/results``); created when missing.  Each
        judge's sub-folder is its name with characters other than letters, digits, ``.``,
        ``_`` and ``-`` replaced by ``_``.
    overwrite : bool, default False
        Write into a folder that is not empty, replacing the files of the same names (other
        files stay, and :func:`read_judge_responses` would read any other ``responses.jsonl``).

    Returns
    -------
    pathlib.Path
        ``folder``.

    Raises
    ------
    DataError
        Aggregated ``data``; a record with two item pairs, two human labels, or a human label
        and no LLM verdict; two verdicts of one record, judge and display order (naming the
        records).
    OutputError
        ``folder`` is a file, is not empty (without ``overwrite``) or cannot be written.
    """
    lines = _response_lines(data)
    root = _output_folder(folder, overwrite)
    for judge, sub in _judge_folders(list(pd.unique(lines["judge"]))).items():
        _write_lines(lines.loc[lines["judge"].to_numpy() == judge], root / sub / "responses.jsonl")
    return root


def _record_checks(f: pd.DataFrame, rec: np.ndarray, is_human: np.ndarray, records: pd.Index) -> None:
    """Refuse (:class:`DataError`) records the format cannot hold: see :func:`write_judge_responses`."""
    pair = f["i"].to_numpy(np.int64) * (int(f["j"].max()) + 1) + f["j"].to_numpy(np.int64)
    a = f["a"].to_numpy(np.int64)
    judge = f["judge"].cat.codes.to_numpy(np.int64)
    problems = {
        "more than one item pair": pd.Series(pair).groupby(rec).nunique().to_numpy() > 1,
        "two human labels": np.bincount(rec[is_human], minlength=len(records)) > 1,
        "a human label and no LLM verdict": (np.bincount(rec[is_human], minlength=len(records)) > 0)
                                            & (np.bincount(rec[~is_human], minlength=len(records)) == 0),
    }
    dup = pd.DataFrame({"r": rec, "k": judge, "a": a})[~is_human].duplicated().to_numpy()
    problems["two verdicts of one judge in one display order"] = np.bincount(
        rec[~is_human][dup], minlength=len(records)) > 0
    for what, bad in problems.items():
        if bad.any():
            shown = [str(x) for x in records[np.flatnonzero(bad)[:LISTED]]]
            raise DataError(f"data: record(s) {shown}{' ...' if bad.sum() > LISTED else ''} ({int(bad.sum())} in all) "
                            f"have {what}; the judge-response format holds one item pair, at most one human label "
                            "and one verdict per judge and display order per record, judged by an LLM")


def _response_lines(data: Comparisons) -> pd.DataFrame:
    """Return the lines of :func:`write_judge_responses`: one row per LLM judgment, the fields in order."""
    if data.aggregated:
        raise DataError("data: aggregated counts carry no record ids; write_judge_responses needs the judgments "
                        "row by row (Comparisons.from_frame, pydial.read_judge_responses)")
    f = data.frame
    rec, records = pd.factorize(f["record_id"], sort=False)
    is_human = (f["judge"] == data.human_judge).to_numpy()
    _record_checks(f, rec, is_human, pd.Index(records))
    verdicts = np.asarray([CANONICAL_VERDICTS[c] for c in range(len(CANONICAL_VERDICTS))], object)
    human = np.full(len(records), None, object)
    human[rec[is_human]] = verdicts[f["outcome"].to_numpy(np.int64)[is_human]]
    llm = f.loc[~is_human]
    items = np.asarray(data.items, object)
    first = llm["a"].to_numpy() > 0
    outcome = llm["outcome"].to_numpy(np.int64)
    shown = np.where(first, "model_a", "model_b").astype(object)
    other = np.where(first, "model_b", "model_a").astype(object)
    choice = np.select([outcome == CANON_TIE, outcome == CANON_BOTH_BAD, (outcome == I_WINS) == first],
                       ["c", "d", "a"], "b").astype(object)
    judge = llm["judge"].astype(str).to_numpy(object)
    return pd.DataFrame({
        "record_id": np.asarray([str(x) for x in records], object)[rec[~is_human]],
        "human_winner": human[rec[~is_human]], "model_a": items[llm["i"].to_numpy()],
        "model_b": items[llm["j"].to_numpy()], "judge": judge, "judge_model": judge,
        "condition_id": np.where(first, "original_anonymous", "swapped_anonymous").astype(object),
        "response_order_default": first, "displayed_a_original_side": shown, "displayed_b_original_side": other,
        "query_index": 0, "choice": choice, "canonical_verdict": verdicts[outcome], "confidence": None,
        "raw_response": None})


def _judge_folders(judges: Sequence[str]) -> dict[str, str]:
    """Each judge's sub-folder: its name made safe for a path, made distinct by ``-2``, ``-3``, ... when needed."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for judge in judges:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", judge).strip(".") or "judge"
        name, n = base, 1
        while name.lower() in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name.lower())
        out[judge] = name
    return out


def _output_folder(folder: str | PathLike[str], overwrite: bool) -> Path:
    """Create ``folder``; :class:`OutputError` when it is a file, or not empty without ``overwrite``."""
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise OutputError(f"folder: cannot write the judge responses into {root}: it is a file")
    if root.is_dir() and any(root.iterdir()) and not overwrite:
        raise OutputError(f"folder: {root} is not empty; pass overwrite=True to write into it (files of the same "
                          "names are replaced)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"folder: cannot create {root}: {e.strerror or e}") from None
    return root


def _write_lines(lines: pd.DataFrame, path: Path) -> None:
    """Write ``lines`` as JSON lines to ``path`` (through a temporary file: a failed write leaves no partial file)."""
    tmp = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lines.to_json(tmp, orient="records", lines=True, force_ascii=False)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"folder: cannot write {path}: {e.strerror or e}") from None
