"""Every reader validates alike: frame, CSV, gzip CSV, Parquet, counts and the command line.

The differential test feeds the same judgments (hypothesis-generated, with missing
cells, numeric-typed and padded names, case variants, duplicates and unknown labels)
through every path and requires the same :class:`~pydial.Comparisons` or the same typed
error naming the same rows and column.  The reference cells are counted by a plain
Python loop over the rows, independent of the readers.  The regression tests
reproduce the reader bugs each path had (a null Parquet cell taking another row's
value, ``4`` and ``4.0`` read as two items, counts beyond int64 dropped, unreadable
gzip files and Parquet on the command line).
"""

from __future__ import annotations

import dataclasses
import gzip
import re
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pydial
from pydial import ArgumentError, Comparisons, DataError, MemoryLimitError
from pydial.cli import EXIT_DATA, main
from pydial.data import counts

COLS = ["record_id", "judge", "item_a", "item_b", "first", "winner"]
WINS = {"a": "wins_a", "b": "wins_b", "tie": "ties", "both_bad": "both_bad"}


# ------------------------------------------------------------ references
def reference_cells(df: pd.DataFrame) -> tuple[dict, dict]:
    """LLM and human cells counted row by row in plain Python (names as text, stripped)."""
    def name(x):
        return str(x).strip()

    items = sorted({name(x) for x in df["item_a"]} | {name(x) for x in df["item_b"]})
    pos = {n: k for k, n in enumerate(items)}
    llm: Counter = Counter()
    llm_y: Counter = Counter()
    hum: Counter = Counter()
    hum_y: Counter = Counter()
    for r in df.itertuples(index=False):
        a, b, w = name(r.item_a), name(r.item_b), str(r.winner).strip().lower()
        if a == b or w not in ("a", "b"):
            continue
        i, j = sorted((a, b), key=pos.__getitem__)
        a_won = (w == "a") == (i == a)  # the canonical item i won
        if name(r.judge) == "human":
            hum[(i, j)] += 1
            hum_y[(i, j)] += a_won
        else:
            shown_first = a if str(r.first).strip().lower() == "a" else b
            key = (name(r.judge), i, j, 1 if shown_first == i else -1)
            llm[key] += 1
            llm_y[key] += a_won
    return ({k: (n, llm_y[k]) for k, n in llm.items()}, {k: (n, hum_y[k]) for k, n in hum.items()})


def cells(c: Comparisons) -> tuple[dict, dict]:
    """The cells of ``c`` in the form of :func:`reference_cells`."""
    t, h = c.llm_cells(), c.human_cells()
    return ({(r.judge, r.item_i, r.item_j, int(r.a)): (int(r.n), int(r.y)) for r in t.itertuples()},
            {(r.item_i, r.item_j): (int(r.n), int(r.y)) for r in h.itertuples()})


def snapshot(c: Comparisons, aggregated: bool) -> dict:
    """Everything that must agree between readers (record counts only between row readers)."""
    s = c.summary()["value"].to_dict()
    if aggregated:
        s.pop("records")
        s.pop("duplicated rows (identical in all six columns)")
    return {"items": c.items, "judges": c.judges, "summary": s,
            **{f"{part}.{f.name}": getattr(getattr(c, part), f.name).tolist()
               for part in ("llm", "human") for f in dataclasses.fields(getattr(c, part))
               if getattr(getattr(c, part), f.name) is not None}}


def counts_table(df: pd.DataFrame) -> pd.DataFrame:
    """The long table summed per (judge, item_a, item_b, first) with a plain pandas groupby."""
    f = df.copy()
    f["first"] = f["first"].where(f["judge"].map(lambda x: str(x).strip()) != "human", "")
    w = f["winner"].map(lambda x: str(x).strip().lower())
    for label, col in WINS.items():
        f[col] = (w == label).astype("int64")
    return f.groupby(["judge", "item_a", "item_b", "first"], dropna=False, as_index=False)[list(WINS.values())].sum()


def as_text(df: pd.DataFrame) -> pd.DataFrame:
    """The table as a CSV holds it: every cell as written, a missing or blank cell missing."""
    def text(x):
        return None if x is None or (isinstance(x, float) and np.isnan(x)) or not str(x).strip() else str(x)

    return pd.DataFrame({c: df[c].map(text).astype(object) for c in df.columns})


# ------------------------------------------------------------ the paths
def outcome(read, *args, **kwargs):
    """The result of a reader, or its exception."""
    try:
        return read(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - compared by class below
        return e


def rows_named(msg: str) -> list[str]:
    return re.findall(r"rows \[[^\]]*\] \(\d+ in all\)", msg)


def columns_named(msg: str) -> set[str]:
    return set(re.findall(r"column '([^']*)'", msg))


def assert_same(ref, got, path: str, aggregated: bool, rows: bool = True) -> None:
    """``got`` equals the reference result, or raises the same error class naming the same rows and column."""
    if isinstance(ref, Exception):
        assert type(got) is type(ref), f"{path}: expected {type(ref).__name__} ({ref}), got {got!r}"
        r, g = str(ref), str(got)
        if rows_named(r):
            assert columns_named(g) == columns_named(r), f"{path}: {g} vs {r}"
            if rows:
                assert rows_named(g) == rows_named(r), f"{path}: {g} vs {r}"
        else:  # e.g. two spellings of a name: the same names (the column first seen may differ by chunk)
            assert re.sub(r" \(from [^)]*\)", "", g) == re.sub(r" \(from [^)]*\)", "", r), f"{path}: {g} vs {r}"
        return
    assert not isinstance(got, Exception), f"{path}: raised {got!r}, the reference did not"
    assert snapshot(got, aggregated) == snapshot(ref, aggregated), path


def through_every_path(df: pd.DataFrame, tmp: Path) -> None:
    """Read ``df`` through every reader and compare with ``from_frame`` of what each reader sees."""
    ref = outcome(Comparisons.from_frame, df)
    if not isinstance(ref, Exception):
        assert cells(ref) == reference_cells(df)
    # Parquet keeps the column types, so it must agree with the frame itself
    parquet = tmp / "t.parquet"
    df.to_parquet(parquet, index=False)
    assert_same(ref, outcome(Comparisons.from_parquet, parquet), "from_parquet", False)
    assert_same(ref, outcome(pydial.read_comparisons, parquet, chunksize=7), "read_comparisons(parquet)", True)
    with mock.patch.object(counts, "RAW_ROWS", 10):  # count the rows read every other chunk (a file beyond memory)
        assert_same(ref, outcome(pydial.read_comparisons, parquet, chunksize=7), "read_comparisons(parquet, counted)",
                    True)
    if df["winner"].notna().all() and df["winner"].map(lambda x: str(x).strip().lower() in WINS).all():
        assert_same(ref, outcome(Comparisons.from_counts, counts_table(df)), "from_counts", True, rows=False)
    # a CSV holds text: compare with the frame of the text it holds
    text = as_text(df)
    ref_text = outcome(Comparisons.from_frame, text)
    for suffix in (".csv", ".csv.gz"):
        path = tmp / f"t{suffix}"
        df.to_csv(path, index=False)
        assert_same(ref_text, outcome(Comparisons.from_csv, path), f"from_csv({suffix})", False)
        assert_same(ref_text, outcome(pydial.read_comparisons, path, chunksize=5), f"read_comparisons({suffix})", True)


NAMES = {"text": lambda k: f"m{k}", "int": lambda k: k, "float": lambda k: float(k)}
DEFECTS = [None, None, None, "null_judge", "null_item_a", "null_item_b", "null_first", "null_winner", "unknown_winner",
           "blank_item", "padded_names", "case_judge", "duplicates", "float_item_b"]


@st.composite
def long_tables(draw) -> pd.DataFrame:
    n = draw(st.integers(3, 24))
    kind = draw(st.sampled_from(sorted(NAMES)))
    judges = draw(st.lists(st.sampled_from(["g1", "g2", "human"]), min_size=n, max_size=n))
    a = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    b = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    first = draw(st.lists(st.sampled_from(["a", "b", "A", " b"]), min_size=n, max_size=n))
    winner = draw(st.lists(st.sampled_from(["a", "b", "a", "b", "tie", "both_bad", "B "]), min_size=n, max_size=n))
    df = pd.DataFrame({"record_id": np.arange(n) // 2, "judge": judges,
                       "item_a": [NAMES[kind](k) for k in a], "item_b": [NAMES[kind](k) for k in b],
                       "first": [None if j == "human" else f for j, f in zip(judges, first)], "winner": winner})
    defect = draw(st.sampled_from(DEFECTS))
    row = draw(st.integers(0, n - 1))
    if defect and defect.startswith("null_"):
        col = defect[5:]
        df[col] = df[col].astype(object)
        df.loc[row, col] = None
        if col == "first":
            df.loc[row, "judge"] = "g1"  # display order is required on LLM rows only
    elif defect == "unknown_winner":
        df.loc[row, "winner"] = "draw"
    elif defect == "blank_item" and kind == "text":  # a Parquet column holds one type
        df["item_b"] = df["item_b"].astype(object)
        df.loc[row, "item_b"] = "   "
    elif defect == "padded_names" and kind == "text":
        df["judge"] = df["judge"].map(lambda j: f" {j} ")
        df["item_a"] = df["item_a"].map(lambda x: f"{x} ")
    elif defect == "case_judge":
        df.loc[row, "judge"] = "G1"
    elif defect == "duplicates":
        df = pd.concat([df, df.iloc[: row + 1]], ignore_index=True)
    elif defect == "float_item_b" and kind == "int":
        df["item_b"] = df["item_b"].astype(float)  # 4 and 4.0: two spellings of one name
    return df


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(df=long_tables())
def test_every_reader_gives_the_same_comparisons_or_the_same_error(df, tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pydial.DataWarning)
        through_every_path(df, tmp_path)


@settings(max_examples=30, deadline=None)
@given(counts=st.lists(st.tuples(st.sampled_from(["g", "human"]), st.integers(0, 2), st.integers(0, 2),
                                 st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(0, 3),
                                 st.integers(0, 2)), min_size=2, max_size=10),
       huge=st.sampled_from([None, 2**53, 10**19, 1e19, 1.5, -1]))
def test_counts_equal_the_rows_they_sum_and_refuse_huge_or_bad_counts(counts, huge):
    t = pd.DataFrame(counts, columns=["judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties"])
    t[["item_a", "item_b"]] = "m" + t[["item_a", "item_b"]].astype(str)
    if huge is not None:
        t["wins_a"] = t["wins_a"].astype(object)
        t.loc[1, "wins_a"] = huge
        with pytest.raises(DataError, match=r"'wins_a'.*rows \[1\]"):
            Comparisons.from_counts(t)
        return
    rows = [(k, r.judge, r.item_a, r.item_b, r.first, w) for k, r in enumerate(t.itertuples())
            for w, col in (("a", "wins_a"), ("b", "wins_b"), ("tie", "ties")) for _ in range(getattr(r, col))]
    items = sorted(set(t["item_a"]) | set(t["item_b"]))  # a key with zero counts still names its items
    ref = outcome(Comparisons.from_frame, pd.DataFrame(rows, columns=COLS), items=items) if rows else DataError()
    got = outcome(Comparisons.from_counts, t)
    if isinstance(ref, Exception):
        assert type(got) is DataError
    else:
        assert snapshot(got, True) == snapshot(ref, True)
        assert cells(got) == reference_cells(pd.DataFrame(rows, columns=COLS))


# ------------------------------------------------------ the bugs, one by one
@pytest.fixture(scope="module")
def sim_frame() -> pd.DataFrame:
    return pydial.simulate(N=5, K=3, n_llm=3000, n_human=500, seed=2).frame


@pytest.mark.parametrize("col", ["judge", "item_a", "item_b", "first", "winner"])
def test_a_null_parquet_cell_is_refused_not_filled(tmp_path, sim_frame, col):
    f = sim_frame.copy()
    row = int(np.flatnonzero(f["judge"] != "human")[10])  # an LLM row: its display order is required
    f[col] = f[col].astype(object)
    f.loc[row, col] = None
    path = tmp_path / "null.parquet"
    f.to_parquet(path, index=False)
    for read in (pydial.read_comparisons, Comparisons.from_parquet):
        with pytest.raises(DataError, match=rf"missing values in column '{col}' at rows \[{row}\]"):
            read(path)


def test_a_null_display_order_on_a_human_row_is_ignored(tmp_path, sim_frame):
    f = sim_frame.copy()
    f["first"] = f["first"].astype(object)
    f.loc[f["judge"] == "human", "first"] = None
    path = tmp_path / "h.parquet"
    f.to_parquet(path, index=False)
    got = pydial.read_comparisons(path)
    assert (got.n_human, got.n_llm) == (500, 3000)
    assert cells(got) == reference_cells(sim_frame)


@pytest.mark.parametrize("where", ["parquet", "counts", "frame"])
def test_4_and_4_0_are_two_spellings_of_one_item_everywhere(tmp_path, sim_frame, where):
    f = sim_frame.copy()
    codes = {name: k for k, name in enumerate(sorted(set(f["item_a"]) | set(f["item_b"])))}
    f["item_a"] = f["item_a"].map(codes).astype("int64")
    f["item_b"] = f["item_b"].map(codes).astype("float64")
    with pytest.raises(DataError, match=r"'\d', '\d\.0'.*numeric type"):
        if where == "parquet":
            f.to_parquet(tmp_path / "n.parquet", index=False)
            pydial.read_comparisons(tmp_path / "n.parquet")
        elif where == "counts":
            Comparisons.from_counts(counts_table(f))
        else:
            Comparisons.from_frame(f)
    f["item_b"] = f["item_b"].astype("int64")  # one numeric type: the names are str(value)
    assert Comparisons.from_counts(counts_table(f)).items == tuple(str(k) for k in range(5))


@pytest.mark.parametrize("huge", [1e19, 10**19, np.uint64(2**63 + 5)])
def test_counts_beyond_int64_are_refused(huge):
    t = pd.DataFrame({"judge": ["g", "g", "human"], "item_a": ["x", "y", "x"], "item_b": ["y", "x", "y"],
                      "first": ["a", "b", ""], "wins_a": [3, 1, 2], "wins_b": [1, 2, 1], "ties": [0, 0, 0]})
    t["wins_a"] = pd.Series([huge, 1, 2], dtype=np.asarray(huge).dtype if isinstance(huge, np.generic) else object)
    with pytest.raises(DataError, match=r"'wins_a'.*below 2\*\*53.*rows \[0\]"):
        Comparisons.from_counts(t)


def test_counts_summing_past_2_53_are_refused():
    t = pd.DataFrame({"judge": ["g", "g", "human"], "item_a": ["x", "x", "x"], "item_b": ["y", "y", "y"],
                      "first": ["a", "a", ""], "wins_a": [2**52, 2**52, 2], "wins_b": [1, 2, 1], "ties": [0, 0, 0]})
    with pytest.raises(DataError, match="2\\*\\*53 or more"):
        Comparisons.from_counts(t)


def _gzip_bad(tmp_path: Path, sim_frame: pd.DataFrame, how: str) -> Path:
    path = tmp_path / f"{how}.csv.gz"
    sim_frame.to_csv(path, index=False)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2] if how == "truncated" else raw[:20] + b"\x00garbage" * 50 + raw[-8:])
    return path


@pytest.mark.parametrize("how", ["truncated", "corrupt"])
def test_a_broken_gzip_file_is_a_data_error_naming_it(tmp_path, sim_frame, how, capsys):
    path = _gzip_bad(tmp_path, sim_frame, how)
    for read in (pydial.read_comparisons, Comparisons.from_csv):
        with pytest.raises(DataError, match=rf"cannot read .*{how}\.csv\.gz"):
            read(path)
    for argv in (["check", str(path)], ["convert", "table", str(path), "--out", str(tmp_path / "out.csv")]):
        assert main(argv) == EXIT_DATA
        err = capsys.readouterr().err
        assert err.startswith("pydial: bad input: cannot read") and "Traceback" not in err and len(err.splitlines()) == 1


def test_a_missing_parquet_column_is_named(tmp_path, sim_frame):
    path = tmp_path / "nowinner.parquet"
    sim_frame.drop(columns="winner").to_parquet(path, index=False)
    for read in (pydial.read_comparisons, Comparisons.from_parquet):
        with pytest.raises(DataError, match=r"lacks the column\(s\) \['winner'\]"):
            read(path)


def test_not_a_parquet_file_is_a_data_error(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_text("record_id,judge\n1,g\n")
    with pytest.raises(DataError, match="cannot read .*x.parquet"):
        pydial.read_comparisons(path)


def test_the_command_line_reads_parquet(tmp_path, sim_frame, capsys):
    path, csv = tmp_path / "x.parquet", tmp_path / "x.csv"
    sim_frame.to_parquet(path, index=False)
    sim_frame.to_csv(csv, index=False)
    out = []
    for p in (path, csv):
        assert main(["fit", str(p), "--method", "human"]) == 0
        out.append(capsys.readouterr().out)
    assert out[0] == out[1] and "human" in out[0]


def test_unused_categories_are_not_items(sim_frame, tmp_path):
    f = sim_frame.copy()
    for col in ("item_a", "item_b", "judge"):
        f[col] = pd.Categorical(f[col], categories=sorted(set(f[col])) + ["never"])
    ref = Comparisons.from_frame(sim_frame)
    assert Comparisons.from_frame(f).items == ref.items
    f.to_parquet(tmp_path / "c.parquet", index=False)
    assert pydial.read_comparisons(tmp_path / "c.parquet").items == ref.items


# ------------------------------------------------------ memory and progress
def test_a_read_that_cannot_fit_raises_memory_limit_error(tmp_path, sim_frame, monkeypatch):
    path = tmp_path / "m.parquet"
    sim_frame.to_parquet(path, index=False)
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "100KB")
    with pytest.raises(MemoryLimitError, match=r"from_frame of 3,500 rows needs about .* GB.*PYDIAL_MEMORY_LIMIT"):
        Comparisons.from_frame(sim_frame)
    with pytest.raises(MemoryLimitError, match="3,500 rows of m.parquet"):
        Comparisons.from_parquet(path)
    with pytest.raises(MemoryLimitError, match="chunks of 1,000 rows.*smaller chunksize"):
        pydial.read_comparisons(path, chunksize=1000)
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "2MB")  # one chunk of 1,000 rows fits
    assert pydial.read_comparisons(path, chunksize=1000).n_human == 500
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "lots")  # one error for a bad setting, as in pydial.resources
    for read in (lambda: Comparisons.from_frame(sim_frame), lambda: Comparisons.from_parquet(path),
                 lambda: pydial.read_comparisons(path, chunksize=1000)):
        with pytest.raises(ArgumentError, match="PYDIAL_MEMORY_LIMIT='lots' is not a number of bytes"):
            read()


def test_progress_only_on_a_terminal(tmp_path, sim_frame, monkeypatch, capsys):
    import sys

    from pydial.data import ingest

    path = tmp_path / "p.parquet"
    sim_frame.to_parquet(path, index=False)
    monkeypatch.setattr(ingest, "PROGRESS_MIN_ROWS", 0)
    pydial.read_comparisons(path, chunksize=500)
    assert capsys.readouterr().err == ""  # not a terminal: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    pydial.read_comparisons(path, chunksize=500)
    assert "reading p.parquet" in capsys.readouterr().err
