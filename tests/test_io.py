"""Converters: exact read / kept / excluded counts on small fixtures of each format."""

import gzip
import json

import pandas as pd
import pytest

import pydial
from pydial.data.io import from_arena, from_mtbench, from_pandalm, from_table


def _write_jsonl(path, rows, gz=False):
    opener = gzip.open if gz else open
    with opener(path, "wt") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


ARENA_HUMAN = [
    {"question_id": "q1", "model_a": "x", "model_b": "y", "winner": "model_a"},
    {"question_id": "q2", "model_a": "y", "model_b": "z", "winner": "tie"},
    {"question_id": "q3", "model_a": "z", "model_b": "x", "winner": "tie (bothbad)"},
    {"question_id": "q4", "model_a": "x", "model_b": "z", "winner": "model_b"},
]
ARENA_LLM = [
    {"question_id": "q1", "model_a": "x", "model_b": "y", "winner": "model_b"},
    {"question_id": "q2", "model_a": "y", "model_b": "z", "winner": "model_a"},
    {"question_id": "q3", "model_a": "z", "model_b": "x", "winner": "model_a"},
    {"question_id": "q4", "model_a": "x", "model_b": "z", "winner": "garbage"},
]


def test_arena_counts_and_mapping(tmp_path):
    _write_jsonl(tmp_path / "h.jsonl.gz", ARENA_HUMAN, gz=True)
    _write_jsonl(tmp_path / "g.jsonl", ARENA_LLM)
    frame, rep = from_arena({"human": tmp_path / "h.jsonl.gz", "gpt": tmp_path / "g.jsonl"})
    assert rep.read == 8 and rep.kept == 7
    assert rep.excluded == {"unknown winner (gpt)": 1}
    assert "model_a first" in " ".join(rep.notes)
    assert list(frame.columns) == ["record_id", "judge", "item_a", "item_b", "first", "winner"]
    h = frame[frame.judge == "human"]
    assert list(h.winner) == ["a", "tie", "both_bad", "b"]
    data = pydial.Comparisons.from_frame(frame)
    s = data.summary()["value"]
    assert s["human ties"] == 1 and s["human both bad"] == 1 and s["decisive human labels n_H"] == 2
    # q3: z first vs x, z wins -> canonical (x, z): j wins, a = -1 (x shown second)
    cells = data.llm_cells()
    row = cells[(cells.item_i == "x") & (cells.item_j == "z")]
    assert row[["a", "n", "y"]].values.tolist() == [[-1, 1, 0]]


def test_arena_display_order_override():
    frame, rep = from_arena({"gpt": pd.DataFrame(ARENA_LLM[:3])}, first="b")
    assert set(frame["first"]) == {"b"}
    with pytest.raises(ValueError, match="first"):
        from_arena({"gpt": pd.DataFrame(ARENA_LLM)}, first="c")


def test_arena_missing_column_is_named():
    bad = pd.DataFrame([{"question_id": "q", "model_a": "x", "winner": "model_a"}])
    with pytest.raises(pydial.DataError, match="model_b"):
        from_arena({"gpt": bad})


def test_mtbench_both_orders_and_errors():
    rows = pd.DataFrame([
        {"question_id": 81, "model_1": "x", "model_2": "y", "g1_winner": "model_1", "g2_winner": "model_1", "judge": ["gpt-4", "pair-v2"], "turn": 1},
        {"question_id": 82, "model_1": "y", "model_2": "z", "g1_winner": "error", "g2_winner": "tie", "judge": ["gpt-4", "pair-v2"], "turn": 1},
        {"question_id": 83, "model_1": "x", "model_2": "z", "g1_winner": "model_2", "g2_winner": "error", "judge": ["gpt-4", "pair-v2"], "turn": 2},
    ])
    frame, rep = from_mtbench(rows)
    assert rep.read == 3 and rep.kept == 4
    assert rep.excluded == {"g1_winner error verdicts": 1, "g2_winner error verdicts": 1}
    g = frame[frame.record_id == "81-t1"].sort_values("first")
    assert g["first"].tolist() == ["a", "b"] and g["winner"].tolist() == ["a", "a"]
    data = pydial.Comparisons.from_frame(frame)
    cells = data.llm_cells()
    # record 81: x beats y with x first (a=+1) and with y first (a=-1)
    xy = cells[(cells.item_i == "x") & (cells.item_j == "y")].sort_values("a")
    assert xy[["a", "n", "y"]].values.tolist() == [[-1, 1, 1], [1, 1, 1]]


def test_pandalm_labels():
    rows = pd.DataFrame({"question_id": [1, 2, 3, 4], "model1": ["a1", "a1", "b2", "a1"], "model2": ["b2", "c3", "c3", "c3"],
                         "label": [1, 2, 0, 7]})
    frame, rep = from_pandalm(rows, judge="pandalm-7b")
    assert rep.read == 4 and rep.kept == 3 and rep.excluded == {"unknown label": 1}
    assert frame["winner"].tolist() == ["a", "b", "tie"] and set(frame["judge"]) == {"pandalm-7b"}


def test_generic_table_mapping(tmp_path):
    df = pd.DataFrame({"rid": [1, 2], "who": ["g", "human"], "A": ["x", "y"], "B": ["y", "x"], "shown": ["a", None], "res": ["a", "b"]})
    df.to_csv(tmp_path / "t.csv", index=False)
    frame, rep = from_table(tmp_path / "t.csv", columns={"record_id": "rid", "judge": "who", "item_a": "A", "item_b": "B", "first": "shown", "winner": "res"})
    assert rep.read == 2 and rep.kept == 2
    d = pydial.Comparisons.from_frame(frame)
    assert d.n_human == 1 and d.n_llm == 1
    with pytest.raises(pydial.DataError, match="rid"):
        from_table(tmp_path / "t.csv")


def test_bundled_arena_matches_source_counts():
    data = pydial.datasets.arena()
    s = data.summary()["value"]
    # README of the source: human 9,516 / 9,391 / 2,880 / 5,132; LLM ties 7,453 + 7,924 + 52
    assert s["decisive human labels n_H"] == 9516 + 9391
    assert s["human ties"] == 2880 and s["human both bad"] == 5132
    assert s["LLM ties"] == 7453 + 7924 + 52
    assert data.n_llm == (10732 + 8734) + (7507 + 11488) + (23176 + 3691)
    assert data.N == 20 and data.K == 3
