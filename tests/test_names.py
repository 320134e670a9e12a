"""Names are data: identifiers read as text, whitespace, similar spellings, duplicates."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from pydial import Comparisons, DataError
from pydial.data.construction import NAMES_CHANGED
from pydial.exceptions import DataWarning
from pydial.studies.simulate import simulate

ITEMS = ("item00", "item01", "item02", "item03", "item04", "item05")


@pytest.fixture(scope="module")
def sim_frame() -> pd.DataFrame:
    """The issue's reproduction data: N=6, K=3, n_LLM=3000, n_H=400, seed 1 (as text)."""
    f = simulate(6, 3, 1, 3000, 400, seed=1).frame
    return f.astype({c: str for c in ("record_id", "judge", "item_a", "item_b")})


def rename_items(df: pd.DataFrame, new: list) -> pd.DataFrame:
    names = sorted(set(df.item_a) | set(df.item_b))
    m = dict(zip(names, new))
    out = df.copy()
    out["item_a"], out["item_b"] = out.item_a.map(m), out.item_b.map(m)
    return out


def test_whitespace_is_stripped_and_reported(sim_frame):
    d = sim_frame.copy()
    h = d.index[d.judge == "human"]
    d.loc[h[::2], "judge"] = "human "
    d.loc[d.judge == "judge0", "judge"] = "judge0 "
    d.loc[d.index[::3], "item_a"] = " " + d.loc[d.index[::3], "item_a"] + " "
    with pytest.warns(DataWarning, match=r"2 judge name\(s\).*'human '->'human'.*item name"):
        c = Comparisons.from_frame(d)
    assert (c.N, c.K, c.n_human, c.n_llm) == (6, 3, 400, 3000)
    assert c.judges == ("judge0", "judge1", "judge2")
    assert "2 judge name(s)" in c.summary().loc[NAMES_CHANGED, "value"]


def test_whitespace_kept_apart_only_on_request(sim_frame):
    d = sim_frame.copy()
    d.loc[d.index[:10][d.judge.iloc[:10] == "judge0"], "judge"] = "judge0 "
    with pytest.raises(DataError, match=r"'judge0', 'judge0 '.*allow_similar_names=True"):
        Comparisons.from_frame(d, strip_names=False)
    c = Comparisons.from_frame(d, strip_names=False, allow_similar_names=True)
    assert c.K == 4 and "judge0 " in c.judges


def test_case_variants_refused(sim_frame):
    d = sim_frame.copy()
    d.loc[d.index[d.item_a == "item01"][:3], "item_a"] = "ITEM01"
    with pytest.raises(DataError, match=r"item names 'ITEM01', 'item01'"):
        Comparisons.from_frame(d)
    assert Comparisons.from_frame(d, allow_similar_names=True).N == 7


def test_csv_names_are_not_retyped(tmp_path, sim_frame):
    p = tmp_path / "typ.csv"
    rename_items(sim_frame, ["3.1", "3.10", "007", "7", "4", "5"]).to_csv(p, index=False)
    c = Comparisons.from_csv(p)
    assert c.items == ("007", "3.1", "3.10", "4", "5", "7")
    assert c.n_llm == 3000 and c.summary().loc["self-comparisons excluded", "value"] == 0
    rename_items(sim_frame, ["000", "001", "002", "003", "004", "005"]).to_csv(p, index=False)
    assert Comparisons.from_csv(p).items == ("000", "001", "002", "003", "004", "005")


def test_na_and_none_are_names(tmp_path, sim_frame):
    p = tmp_path / "na.csv"
    rename_items(sim_frame, ["NA", "None", "nan", "null", "N/A", "x"]).to_csv(p, index=False)
    c = Comparisons.from_csv(p)
    assert set(c.items) == {"NA", "None", "nan", "null", "N/A", "x"} and c.n_llm == 3000


def test_blank_cell_is_missing(tmp_path, sim_frame):
    d = sim_frame.copy()
    d.loc[7, "item_b"] = "  "
    p = tmp_path / "blank.csv"
    d.to_csv(p, index=False)
    with pytest.raises(DataError, match=r"'item_b' at rows \[7\]"):
        Comparisons.from_csv(p)


def test_int_and_float_spellings_of_one_item_refused(sim_frame):
    d = rename_items(sim_frame, list(range(6)))
    d["item_a"] = d["item_a"].astype(int)
    d["item_b"] = d["item_b"].astype(float)
    with pytest.raises(DataError, match=r"'\d', '\d\.0'.*numeric type"):
        Comparisons.from_frame(d)
    # one numeric type throughout is fine: names are str(value)
    d["item_b"] = d["item_b"].astype(int)
    assert Comparisons.from_frame(d).items == tuple(str(k) for k in range(6))


def test_mixed_object_column_keeps_4_and_4_0_apart():
    d = pd.DataFrame({"record_id": [1, 2], "judge": ["g", "g"], "item_a": pd.Series([4, 4.0], dtype=object),
                      "item_b": ["x", "x"], "first": ["a", "b"], "winner": ["a", "b"]})
    with pytest.raises(DataError, match="'4', '4.0'"):
        Comparisons.from_frame(d)


@pytest.mark.parametrize("as_csv", [False, True])
def test_integer_judge_column_with_integer_human(tmp_path, sim_frame, as_csv):
    d = sim_frame.copy()
    d["judge"] = d.judge.map({"human": 0, "judge0": 1, "judge1": 2, "judge2": 3}).astype(int)
    if as_csv:
        d.to_csv(tmp_path / "j.csv", index=False)
        c = Comparisons.from_csv(tmp_path / "j.csv", human_judge=0)
    else:
        c = Comparisons.from_frame(d, human_judge=0)
    assert c.n_human == 400 and c.judges == ("1", "2", "3")


def test_list_and_dict_cells_refused(sim_frame):
    for col, val in (("item_a", ["x"]), ("judge", {"a": 1}), ("record_id", ["r"])):
        d = sim_frame.copy()
        d[col] = d[col].astype(object)
        d.at[5, col] = val
        with pytest.raises(DataError, match=rf"column '{col}' holds (list|dict) cells at rows \[5\]"):
            Comparisons.from_frame(d)


def test_empty_file_is_data_error(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("")
    with pytest.raises(DataError, match="empty"):
        Comparisons.from_csv(p)


def test_duplicated_rows_counted_kept_dropped_or_refused(sim_frame):
    d = pd.concat([sim_frame, sim_frame.iloc[:5]], ignore_index=True)
    with pytest.warns(DataWarning, match=r"5 duplicated row\(s\).*kept"):
        c = Comparisons.from_frame(d)
    assert c.n_llm + c.n_human == 3405
    assert c.summary().loc["duplicated rows (identical in all six columns)", "value"] == "5 (kept)"
    with pytest.warns(DataWarning, match="dropped"):
        c = Comparisons.from_frame(d, duplicates="drop")
    assert c.n_llm + c.n_human == 3400
    with pytest.raises(DataError, match=r"5 duplicated row\(s\).*rows \[3400, 3401"):
        Comparisons.from_frame(d, duplicates="raise")


def test_clean_data_gives_no_warning(sim_frame):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        Comparisons.from_frame(sim_frame)
