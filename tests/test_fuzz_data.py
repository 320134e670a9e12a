"""The data readers under hostile input: no silent wrong answer, every refusal a typed error naming its cause.

Covariate scales at any size, exact cell keys at any number of items, one rule for names
(Unicode form, invisible characters, bytes and other non-text cells), repeated column
names, the readers' arguments, the memory estimate of ``from_frame``, and every reader
giving the same data for the same table (hypothesis).
"""

from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pydial
from pydial import Comparisons, read_comparisons
from pydial.data import ingest
from pydial.data.construction import NAMES_CHANGED, frame_bytes
from pydial.data.features import comparison_covariates, standardize
from pydial.data.ingest import Keys
from pydial.data.names import clean, fold
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError, DataWarning, MemoryLimitError

ROWS = [  # record, judge, item_a, item_b, first, winner
    (1, "j1", "m1", "m2", "a", "a"), (2, "j1", "m2", "m3", "b", "b"), (3, "j1", "m1", "m3", "a", "b"),
    (4, "j2", "m1", "m2", "b", "a"), (5, "j2", "m2", "m3", "a", "a"), (6, "j2", "m3", "m1", "a", "b"),
    (7, "human", "m1", "m2", "a", "a"), (8, "human", "m2", "m3", "b", "b"), (9, "human", "m1", "m3", "a", "a"),
]
COLS = ["record_id", "judge", "item_a", "item_b", "first", "winner"]


def table(**replace: list) -> pd.DataFrame:
    """The small table of :data:`ROWS` (object columns), with columns replaced."""
    df = pd.DataFrame(ROWS, columns=COLS).astype(object)
    for c, v in replace.items():
        df[c] = pd.Series(v, dtype=object)
    return df


def counts_of(df: pd.DataFrame) -> pd.DataFrame:
    """One count row per judgment of a long table (:meth:`Comparisons.from_counts`)."""
    w = df["winner"]
    out = df[["judge", "item_a", "item_b", "first", *[c for c in df.columns if c not in COLS]]].copy()
    for col, label in (("wins_a", "a"), ("wins_b", "b"), ("ties", "tie"), ("both_bad", "both_bad")):
        out[col] = (w.astype(str).str.strip().str.lower() == label).astype(int)
    return out


def write(df: pd.DataFrame, tmp: Path, name: str) -> tuple[Path, Path]:
    """Write ``df`` as CSV and as Parquet (text columns), return both paths."""
    csv, parquet = tmp / f"{name}.csv", tmp / f"{name}.parquet"
    df.to_csv(csv, index=False)
    pq.write_table(pa.Table.from_pandas(df.astype({c: str for c in df.columns if c in COLS}), preserve_index=False),
                   parquet)
    return csv, parquet


READERS = ("from_frame", "from_csv", "from_parquet", "read_csv", "read_parquet", "from_counts")


def read_all(df: pd.DataFrame, tmp: Path, **kw) -> dict[str, Comparisons | Exception]:
    """The data (or the error) of every reader for one table."""
    csv, parquet = write(df, tmp, "t")
    calls = {
        "from_frame": lambda: Comparisons.from_frame(df, **kw),
        "from_csv": lambda: Comparisons.from_csv(csv, **kw),
        "from_parquet": lambda: Comparisons.from_parquet(parquet, **kw),
        "read_csv": lambda: read_comparisons(csv, chunksize=7, **kw),
        "read_parquet": lambda: read_comparisons(parquet, chunksize=7, **kw),
        "from_counts": lambda: Comparisons.from_counts(counts_of(df), **kw),
    }
    out: dict[str, Comparisons | Exception] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        for name, call in calls.items():
            try:
                out[name] = call()
            except pydial.DialError as e:
                out[name] = e
    return out


def same_data(a: Comparisons, b: Comparisons) -> None:
    """Assert two readers' data are the same: names, cells and summary (but for the record counts)."""
    assert (a.items, a.judges, a.human_judge) == (b.items, b.judges, b.human_judge)
    for cells in ("llm_cells", "human_cells"):
        x, y = (getattr(d, cells)().sort_values(list(getattr(d, cells)().columns)).reset_index(drop=True) for d in (a, b))
        pd.testing.assert_frame_equal(x, y, check_dtype=False)
    rows = [r for r in a.summary().index if not r.startswith(("records", "duplicated rows"))]
    pd.testing.assert_frame_equal(a.summary().loc[rows], b.summary().loc[rows])


# ---------------------------------------------------------------- 1. covariate scales at any size
@pytest.mark.parametrize("big", [1e154, 1e200, np.finfo(float).max])
def test_one_huge_finite_covariate_value_keeps_the_covariate(big):
    """A huge finite value (a float maximum used as a missing marker) no longer makes the scale infinite
    and every standardized value 0: the scale is finite and the covariate still varies."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x_a": rng.normal(size=50), "x_b": 0.0})
    df.loc[3, "x_a"] = big
    z, scale = comparison_covariates(df, ["x"])
    assert np.isfinite(scale["x"]) and 0 < scale["x"] <= big
    assert np.isfinite(z["x"]).all() and np.count_nonzero(z["x"]) == 50
    np.testing.assert_allclose(np.sqrt(np.mean(z["x"] ** 2)), 1.0)


@pytest.mark.parametrize("tiny", [1e-154, 1e-200, 1e-300])
def test_tiny_covariates_are_not_called_constant(tiny):
    """A covariate of size 1e-200 has a scale of that size, standardized exactly (not 'constant')."""
    rng = np.random.default_rng(2)
    d = rng.normal(size=40)
    df = pd.DataFrame({"x_a": d * tiny, "x_b": 0.0})
    z, scale = comparison_covariates(df, ["x"])
    ref, ref_scale = comparison_covariates(pd.DataFrame({"x_a": d, "x_b": 0.0}), ["x"])
    np.testing.assert_allclose(z, ref, rtol=1e-12)
    np.testing.assert_allclose(scale["x"], ref_scale["x"] * tiny, rtol=1e-12)
    with pytest.raises(DataError, match="'x' is constant"):
        comparison_covariates(pd.DataFrame({"x_a": np.full(5, tiny), "x_b": 0.0}), ["x"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=30).filter(
    lambda v: np.ptp(v) > 1e-6 * max(np.max(np.abs(v)), 1e-300)), st.integers(-300, 300))
def test_standardization_is_scale_free(values, power):
    """The standardized covariate does not depend on its unit: ``d`` and ``d * 10**k`` give the same ``z``."""
    d = np.asarray(values)[:, None]
    factor = 10.0 ** power
    scaled = np.abs(d * factor)[d != 0]
    if not np.all(np.isfinite(scaled)) or (scaled.size and scaled.min() < np.finfo(float).tiny):
        return  # the unit change itself overflows or leaves the normal range (the data are not d * 10**k then)
    z, s = standardize(d, ["x"])
    zk, sk = standardize(d * factor, ["x"])
    np.testing.assert_allclose(zk, z, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sk["x"], s["x"] * factor, rtol=1e-9)


def test_overflowing_difference_is_refused_by_name():
    """x_a - x_b that overflows to infinity is a DataError naming the covariate and the row."""
    m = np.finfo(float).max
    df = pd.DataFrame({"x_a": [1.0, m, 2.0], "x_b": [0.0, -m, 1.0]})
    with pytest.raises(DataError, match=r"covariate 'x'.*overflows.*rows \[1\]"):
        comparison_covariates(df, ["x"])
    z, _ = comparison_covariates(pd.DataFrame({"x_a": [1.0, m, 2.0], "x_b": [0.0, m / 2, 1.0]}), ["x"],
                                 transform="normalized")
    assert np.isfinite(z["x"]).all() and z["x"].iloc[1] > 0


def test_reader_with_a_huge_covariate_value_keeps_it():
    """from_frame with one value of 1e300: the covariate is in the data with a finite scale, not all zeros."""
    df = table()
    df["x_a"], df["x_b"] = np.linspace(-1, 1, len(df)), 0.0
    df.loc[2, "x_a"] = 1e300
    c = Comparisons.from_frame(df, covariates=["x"])
    assert np.isfinite(c.covariate_scale["x"]) and np.count_nonzero(c.frame["cov:x"]) == len(df) - 1


# ---------------------------------------------------------------- 2. exact cell keys at any size
@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 2**40), min_size=2, max_size=6), st.integers(0, 2**32 - 1))
def test_keys_are_exact_and_ordered_at_any_size(sizes, seed):
    """Keys round-trip, without changing the keys decoded, and sort as the rows do (lexicographically), also
    where the sizes' product exceeds 2**62 (partial keys ranked)."""
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, s, 300) for s in sizes]
    cols = [np.concatenate([c, [0, s - 1]]) for c, s in zip(cols, sizes)]  # both ends of every range
    keys = Keys(sizes)
    key = keys.encode(cols)
    kept = key.copy()
    for got, want in zip(keys.decode(key), cols):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(key, kept)  # decoding leaves the keys as they were
    order = np.lexsort(cols[::-1])
    assert np.all(np.diff(key[order]) >= 0)
    assert len(np.unique(key)) == len(np.unique(np.column_stack(cols), axis=0))


@pytest.mark.parametrize("n_items", [2**20, 2**20 + 1, 3 * 10**6])
def test_cell_keys_at_a_million_items_with_covariates(n_items):
    """The (k, i, j, a, z) key of a million items and many covariate values overflows a packed int64
    (about 2**63); the keys stay exact: human cells stay human cells."""
    rng = np.random.default_rng(5)
    K, n = 3, 5000
    sizes = (K + 1, n_items, n_items, 2, 2 * 10**6)  # a million distinct covariate rows
    assert np.prod([float(s) for s in sizes]) > 2**63
    cols = [np.append(rng.integers(0, s, n), s - 1) for s in sizes]
    keys = Keys(sizes)
    uk = np.unique(keys.encode(cols))
    k = keys.decode(uk)[0]
    assert np.all(np.diff(k) >= 0)  # judges in order: the human judge (k = K) last
    assert (k == K).sum() == len(np.unique(np.column_stack(cols)[cols[0] == K], axis=0))


def test_readers_agree_when_every_key_is_ranked(tmp_path, monkeypatch):
    """With a 6-bit key budget every reader ranks partial keys (the path of a million items with
    covariates); the data equal those read with 62 bits."""
    df = table()
    df["x_a"], df["x_b"] = np.arange(len(df), dtype=float), 0.5
    ref = read_all(df, tmp_path, covariates=["x"])
    monkeypatch.setattr(ingest, "KEY_BITS", 6)
    got = read_all(df, tmp_path, covariates=["x"])
    for name in READERS:
        assert isinstance(ref[name], Comparisons), (name, ref[name])
        same_data(ref[name], got[name])
        assert got[name].n_human == 3
    same_data(got["from_frame"], got["read_parquet"])


# ---------------------------------------------------------------- 3. names: one rule in every reader
NFC, NFD = "caf\u00e9", "cafe\u0301"


@pytest.mark.parametrize("variant", [NFD, "\u200bm1", "m1\ufeff", "\u00adm1", " m1\u200b ", "\ufeffm1"])
def test_spelling_variants_are_one_name_in_every_reader(tmp_path, variant):
    """NFC / NFD spellings and names with surrounding invisible characters are one item in every reader,
    and the change is counted in summary()."""
    base = clean(variant)[0]
    t = table()
    df = table(item_a=[(variant if k % 2 else base) if x == "m1" else x for k, x in enumerate(t["item_a"])],
               item_b=[base if x == "m1" else x for x in t["item_b"]])
    out = read_all(df, tmp_path)
    for name in READERS:
        assert isinstance(out[name], Comparisons), (name, out[name])
        assert out[name].N == 3, (name, out[name].items)
        assert out[name].summary().loc[NAMES_CHANGED, "value"].startswith("1 item name(s)")
        same_data(out["from_frame"], out[name])


def test_invisible_characters_inside_names_are_similar_spellings():
    """'m\u200b1' and 'm1' differ only by an invisible character: refused (both shown), or kept apart on request."""
    df = table(item_a=["m\u200b1" if x == "m1" and k == 0 else x for k, x in enumerate(table()["item_a"])])
    with pytest.raises(DataError, match=r"'m1', 'm\\u200b1'.*invisible characters"):
        Comparisons.from_frame(df)
    assert Comparisons.from_frame(df, allow_similar_names=True).N == 4


def test_nfc_and_nfd_kept_as_written_are_refused_as_similar():
    """With strip_names=False names are used as written: NFC and NFD spellings clash (refused, named)."""
    df = table(item_a=[NFD if x == "m1" else x for x in table()["item_a"]],
               item_b=[NFC if x == "m1" else x for x in table()["item_b"]])
    with pytest.raises(DataError, match="Unicode normal form"):
        Comparisons.from_frame(df, strip_names=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        assert Comparisons.from_frame(df).N == 3


def test_a_name_of_invisible_characters_only_is_blank():
    """A name of nothing but a zero-width space and a BOM is blank, as a name of spaces is."""
    df = table(item_a=["\u200b\ufeff" if k == 4 else x for k, x in enumerate(table()["item_a"])])
    with pytest.raises(DataError, match=r"empty item a name.*rows \[4\]"):
        Comparisons.from_frame(df)


def test_bytes_cells_are_decoded_in_every_reader(tmp_path):
    """Bytes cells (and a Parquet BINARY column) are names decoded as UTF-8, not "b'm1'"."""
    df = table()
    as_bytes = df.assign(**{c: [x.encode() for x in df[c]] for c in ("judge", "item_a", "item_b")})
    ref = Comparisons.from_frame(df)
    got = Comparisons.from_frame(as_bytes)
    same_data(ref, got)
    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({c: pa.array(list(as_bytes[c]), pa.binary()) if c in ("judge", "item_a", "item_b")
                             else pa.array([str(x) for x in df[c]]) for c in COLS}), p)
    for data in (Comparisons.from_parquet(p), read_comparisons(p)):
        assert data.items == ("m1", "m2", "m3") and data.judges == ("j1", "j2")
    same_data(ref, Comparisons.from_counts(counts_of(as_bytes)))


@pytest.mark.parametrize("cell", [frozenset({"m1"}), {"m1"}, ("m1",), ["m1"], b"\xff\xfe", pd.Timestamp("2024-01-01"),
                                  object()])
def test_non_text_cells_are_refused_by_name_in_every_column(cell):
    """A cell that is not text, UTF-8 bytes, a number or missing is refused, naming the column and the row,
    in the name columns and the label columns alike, by from_frame and from_counts."""
    for col in ("judge", "item_b", "winner"):
        df = table(**{col: [cell if k == 5 else x for k, x in enumerate(table()[col])]})
        with pytest.raises(DataError, match=rf"column '{col}' holds .*rows \[5\]"):
            Comparisons.from_frame(df)
        if col != "winner":
            with pytest.raises(DataError, match=rf"column '{col}' holds .*rows \[5\]"):
                Comparisons.from_counts(counts_of(df.assign(winner=table()["winner"])))


def test_clean_is_the_one_rule():
    """clean() and fold() on the variants of the issue."""
    assert clean(NFD) == (NFC, ("unicode",))
    assert clean("\u200b m1 \ufeff") == ("m1", ("whitespace", "invisible"))
    assert clean("\u00adm1") == ("m1", ("invisible",))
    assert clean(" m1") == ("m1", ("whitespace",))
    assert clean(" m1", strip=False) == (" m1", ())
    assert fold("GPT\u200b-4") == fold("gpt-4") and fold(NFD) == fold(NFC)
    assert clean("\U0001f468\u200d\U0001f469")[0] == "\U0001f468\u200d\U0001f469"  # an emoji ZWJ sequence stays


# ---------------------------------------------------------------- 4. repeated column names
def test_repeated_csv_header_is_refused_by_both_csv_readers(tmp_path):
    """A CSV with the column 'judge' twice is refused by from_csv and read_comparisons, naming it and the file."""
    p = tmp_path / "dup.csv"
    df = table()
    df.insert(6, "judge", "other", allow_duplicates=True)
    df.to_csv(p, index=False)
    for read in (Comparisons.from_csv, read_comparisons):
        with pytest.raises(DataError, match=r"dup\.csv has 1 column name\(s\) more than once: \['judge'\]"):
            read(p)
    df.columns = [*COLS, "note"]
    df.insert(7, "note", "x", allow_duplicates=True)  # a column the readers do not use may repeat
    df.to_csv(p, index=False)
    assert Comparisons.from_csv(p).N == read_comparisons(p).N == 3


def test_repeated_frame_columns_are_refused():
    """from_frame and from_counts refuse a DataFrame with a needed column twice (naming it)."""
    df = table()
    df.insert(6, "item_a", "m9", allow_duplicates=True)
    with pytest.raises(DataError, match=r"the table has 1 column name\(s\) more than once: \['item_a'\]"):
        Comparisons.from_frame(df)
    c = counts_of(table())
    c.insert(0, "wins_a", 1, allow_duplicates=True)
    with pytest.raises(DataError, match=r"more than once: \['wins_a'\]"):
        Comparisons.from_counts(c)


# ---------------------------------------------------------------- 5. the readers' arguments and odd inputs
@pytest.mark.parametrize("kind", ["list", "struct"])
def test_parquet_list_or_struct_column_is_a_data_error(tmp_path, kind):
    """A Parquet list or struct column is refused by both Parquet readers, naming the column and file."""
    cells = [["x"]] * len(ROWS) if kind == "list" else [{"x": 1}] * len(ROWS)
    t = pa.table({c: cells if c == "judge" else [str(r[k]) for r in ROWS] for k, c in enumerate(COLS)})
    p = tmp_path / "n.parquet"
    pq.write_table(t, p)
    for read in (Comparisons.from_parquet, read_comparisons):
        with pytest.raises(DataError, match=rf"column 'judge' of .*n\.parquet holds {kind}"):
            read(p)


@pytest.mark.parametrize("chunksize, error", [("10", ArgumentTypeError), (2.5, ArgumentTypeError),
                                              (True, ArgumentTypeError), (0, ArgumentError), (-3, ArgumentError)])
def test_chunksize_must_be_a_positive_integer(tmp_path, chunksize, error):
    """A string, float, bool, zero or negative chunksize is an ArgumentError naming chunksize (not the file)."""
    csv, _ = write(table(), tmp_path, "t")
    with pytest.raises(error, match="chunksize must be a positive integer"):
        read_comparisons(csv, chunksize=chunksize)
    assert read_comparisons(csv, chunksize=np.int64(2)).N == 3


def test_multiindex_columns_are_a_data_error():
    """MultiIndex columns are refused with a DataError (not an AttributeError)."""
    df = table()
    df.columns = pd.MultiIndex.from_tuples([(c, "x") for c in COLS])
    with pytest.raises(DataError, match="MultiIndex"):
        Comparisons.from_frame(df)
    with pytest.raises(DataError, match="MultiIndex"):
        Comparisons.from_counts(df)


def test_items_as_a_string_is_an_argument_type_error(tmp_path):
    """items='m1m2m3' is refused as a string (not 'lists an item more than once'), by every reader."""
    csv, parquet = write(table(), tmp_path, "t")
    for read in (lambda **k: Comparisons.from_frame(table(), **k), lambda **k: Comparisons.from_csv(csv, **k),
                 lambda **k: read_comparisons(parquet, **k), lambda **k: Comparisons.from_counts(counts_of(table()), **k)):
        with pytest.raises(ArgumentTypeError, match=r"items must be a list of names, got str 'm1m2m3'"):
            read(items="m1m2m3")
    with pytest.raises(DataError, match=r"items= lists the item\(s\) \['m1'\] more than once"):
        Comparisons.from_frame(table(), items=["m1", "m2", " m1", "m3"])
    assert Comparisons.from_frame(table(), items=["m3", NFC, "m2", "m1\u200b"]).items == ("m3", NFC, "m2", "m1")


def test_self_preference_values_are_checked_and_names_cleaned(tmp_path):
    """self_preference={'j1': None} is an ArgumentTypeError; its names are cleaned as the data's are."""
    with pytest.raises(ArgumentTypeError, match=r"self_preference\['j1'\] must be a list of names, got NoneType"):
        Comparisons.from_frame(table(), self_preference={"j1": None})
    csv, _ = write(table(), tmp_path, "t")
    with pytest.raises(ArgumentTypeError, match="self_preference"):
        read_comparisons(csv, self_preference={"j1": None})
    ref = Comparisons.from_frame(table(), self_preference={"j1": ["m1"]})
    for own in ({" j1\u200b": " m1"}, {"j1": [b"m1"]}, {"j1 ": ("m1", "m1 ")}):
        got = Comparisons.from_frame(table(), self_preference=own)
        assert got.self_preference == ref.self_preference == {"j1": ("m1",)}
        same_data(ref, got)


def test_misspelt_from_csv_keyword_is_an_argument_error(tmp_path):
    """A misspelt keyword of from_csv is an ArgumentError naming it (and the likely one), not pandas' TypeError."""
    csv, parquet = write(table(), tmp_path, "t")
    with pytest.raises(ArgumentTypeError, match=r"\['human_jduge'\]; did you mean 'human_judge'"):
        Comparisons.from_csv(csv, human_jduge="human")
    with pytest.raises(ArgumentTypeError, match=r"\['chunksize'\]"):
        Comparisons.from_csv(csv, chunksize=3)
    with pytest.raises(ArgumentTypeError, match=r"\['sep'\]"):
        Comparisons.from_parquet(parquet, sep=";")
    assert Comparisons.from_csv(csv, sep=",", encoding="utf-8").N == 3


def test_blank_record_id_is_refused_by_the_chunked_reader_too(tmp_path):
    """read_comparisons refuses a blank record id as from_csv does (naming the row); None skips the column."""
    df = table(record_id=[1, 2, 3, " ", 5, 6, 7, 8, 9])
    csv, parquet = write(df, tmp_path, "t")
    for read in (Comparisons.from_csv, read_comparisons):
        with pytest.raises(DataError, match=r"missing values in column 'record_id' at rows \[3\]"):
            read(csv)
    t = pq.read_table(parquet).set_column(0, "record_id", pa.array(["1", "2", "3", None, "5", "6", "7", "8", "9"]))
    pq.write_table(t, parquet)
    for read in (Comparisons.from_parquet, read_comparisons):
        with pytest.raises(DataError, match=r"missing values in column 'record_id' at rows \[3\]"):
            read(parquet)
    assert read_comparisons(csv, columns={"record_id": None}).N == 3


def test_human_judge_must_be_a_name():
    """human_judge=None or a list is an ArgumentError naming human_judge."""
    for bad in (None, ["human"]):
        with pytest.raises(ArgumentError, match="human_judge"):
            Comparisons.from_frame(table(), human_judge=bad)


# ---------------------------------------------------------------- 6. memory estimate of from_frame
def test_from_frame_memory_estimate_covers_the_measured_use(monkeypatch):
    """The estimate is at least what was measured (peak RSS of 1M-row frames: about 124 B a row, 213 with one
    covariate, 253 with two, 336 with four) and is what from_frame checks."""
    for p, measured in ((0, 124), (1, 213), (2, 253), (4, 336)):
        assert measured <= frame_bytes(1, p) <= 1.1 * measured + 10
    df = table()
    df["x_a"], df["x_b"] = np.arange(len(df), dtype=float), 0.0
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", str(frame_bytes(len(df), 1) - 1))
    with pytest.raises(MemoryLimitError, match="from_frame"):
        Comparisons.from_frame(df, covariates=["x"])
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", str(frame_bytes(len(df), 1)))
    assert Comparisons.from_frame(df, covariates=["x"]).p == 1


# ---------------------------------------------------------------- every reader, the same data
BASES = ["m1", "m2", NFC, "GPT-4", "007"]
JUDGES = ["j1", "j2", "human"]
DECOR = ["", " ", "\t", "\u00a0", "\u200b", "\ufeff", "\u00ad", "\u3000"]


@st.composite
def spelled(draw: st.DrawFn, names: list[str]) -> str:
    """A name of ``names`` as it may be written: NFC or NFD, surrounded by whitespace or invisible characters."""
    name = draw(st.sampled_from(names))
    if draw(st.booleans()):
        name = unicodedata.normalize("NFD", name)
    return draw(st.sampled_from(DECOR)) + name + draw(st.sampled_from(DECOR))


@st.composite
def tables(draw: st.DrawFn) -> pd.DataFrame:
    """A random long table: spelling variants of a few items and judges, ties, "both bad", self-comparisons."""
    n = draw(st.integers(2, 25))
    items = draw(st.lists(st.sampled_from(BASES), min_size=2, max_size=4, unique=True))
    rows = []
    for r in range(n):
        rows.append((r, draw(spelled(JUDGES)), draw(spelled(items)), draw(spelled(items)),
                     draw(st.sampled_from(["a", "b", " A "])), draw(st.sampled_from(["a", "b", "tie", "both_bad", "B"]))))
    return pd.DataFrame(rows, columns=COLS).astype(object)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(tables(), st.booleans())
def test_every_reader_gives_the_same_data(tmp_path, df, strip):
    """from_frame, from_csv, from_parquet, read_comparisons (CSV and Parquet) and from_counts give the same
    items, judges, cells and summary for a random table, or all raise the same typed error."""
    out = read_all(df, tmp_path, strip_names=strip)
    ok = {name: isinstance(v, Comparisons) for name, v in out.items()}
    assert len(set(ok.values())) == 1, {k: repr(v) for k, v in out.items()}
    if not ok["from_frame"]:
        assert len({type(v) for v in out.values()}) == 1, {k: repr(v) for k, v in out.items()}
        return
    for name in READERS[1:]:
        same_data(out["from_frame"], out[name])  # type: ignore[arg-type]
