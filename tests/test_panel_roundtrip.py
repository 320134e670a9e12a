"""``pydial.write_judge_responses``: the released judge-response format, read back by ``read_judge_responses``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial import Comparisons, DataError, OutputError, read_judge_responses, write_judge_responses

CANON = ["record_id", "judge", "i", "j", "a", "outcome", "self"]


def _canonical(data: Comparisons) -> pd.DataFrame:
    f = data.frame[CANON].assign(record_id=data.frame["record_id"].astype(str), judge=data.frame["judge"].astype(str))
    return f.sort_values(["record_id", "judge", "a"]).reset_index(drop=True).astype({c: np.int64 for c in CANON[2:6]})


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def panel():
    """Both orders, ties, and records without a human label."""
    return pydial.simulate(N=7, K=3, n_llm=120, n_human=80, both_orders=True, tie_rate=0.2, seed=8).comparisons


def test_round_trip(panel, tmp_path):
    out = write_judge_responses(panel, tmp_path / "results")
    assert out == tmp_path / "results"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        f"judge{k}/responses.jsonl" for k in range(3)]
    back = read_judge_responses(out, items=panel.items)
    pd.testing.assert_frame_equal(_canonical(back), _canonical(panel))
    assert back.judges == panel.judges and back.items == panel.items
    assert sorted(back.record_ids) == sorted(str(r) for r in panel.record_ids)
    pd.testing.assert_frame_equal(back.llm_cells(), panel.llm_cells())
    pd.testing.assert_frame_equal(back.human_cells(), panel.human_cells())
    summary = back.summary()["value"]
    assert summary["panel: lines read"] == 2 * 3 * 120
    assert summary["panel: records without a human label (no human row)"] == 120 - 80
    assert summary["panel: records a judge judged in one order only"] == "0"
    d0 = pydial.judge_diagnostics(panel, n_boot=0)
    d1 = pydial.judge_diagnostics(back, n_boot=0)
    pd.testing.assert_frame_equal(d0, d1, check_like=True)


def test_each_line_by_hand(tmp_path):
    """Item B shown first and preferred; the people prefer A: every field follows from that."""
    frame = pd.DataFrame({"record_id": ["r1", "r1", "r1"], "judge": ["x", "x", "human"], "item_a": ["B", "B", "B"],
                          "item_b": ["A", "A", "A"], "first": ["a", "b", "a"], "winner": ["a", "tie", "b"]})
    data = Comparisons.from_frame(frame)
    lines = _lines(write_judge_responses(data, tmp_path / "out") / "x" / "responses.jsonl")
    assert len(lines) == 2
    swapped, original = sorted(lines, key=lambda x: x["response_order_default"])
    common = {"record_id": "r1", "model_a": "A", "model_b": "B", "human_winner": "model_a", "judge": "x",
              "judge_model": "x", "query_index": 0, "confidence": None, "raw_response": None}
    assert swapped == {**common, "condition_id": "swapped_anonymous", "response_order_default": False,
                       "displayed_a_original_side": "model_b", "displayed_b_original_side": "model_a",
                       "choice": "a", "canonical_verdict": "model_b"}
    assert original == {**common, "condition_id": "original_anonymous", "response_order_default": True,
                        "displayed_a_original_side": "model_a", "displayed_b_original_side": "model_b",
                        "choice": "c", "canonical_verdict": "tie"}


@pytest.mark.parametrize("winner,first,choice,verdict", [
    ("a", "a", "a", "model_a"), ("a", "b", "b", "model_a"), ("b", "a", "b", "model_b"), ("b", "b", "a", "model_b"),
    ("tie", "a", "c", "tie"), ("both_bad", "b", "d", "both_bad"),
])
def test_choice_and_verdict(tmp_path, winner, first, choice, verdict):
    frame = pd.DataFrame({"record_id": [1, 2], "judge": ["x", "x"], "item_a": ["A", "A"], "item_b": ["B", "B"],
                          "first": [first, "a"], "winner": [winner, "a"]})
    out = write_judge_responses(Comparisons.from_frame(frame), tmp_path / "out")
    line = _lines(out / "x" / "responses.jsonl")[0]
    assert (line["choice"], line["canonical_verdict"], line["human_winner"]) == (choice, verdict, None)
    assert line["response_order_default"] is (first == "a")


def test_judge_names_made_safe_for_folders(tmp_path):
    frame = pd.DataFrame({"record_id": [1, 1, 1, 1], "judge": ["org/model:7b", "org model:7b", "x", "human"],
                          "item_a": ["A"] * 4, "item_b": ["B"] * 4, "first": ["a", "b", "a", "a"],
                          "winner": ["a", "b", "b", "a"]})
    data = Comparisons.from_frame(frame)
    out = write_judge_responses(data, tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["org_model_7b", "org_model_7b-2", "x"]
    back = read_judge_responses(out)
    assert sorted(back.judges) == sorted(data.judges)
    pd.testing.assert_frame_equal(_canonical(back), _canonical(data))


def _frame(**changes):
    base = {"record_id": [1, 1, 1], "judge": ["x", "x", "human"], "item_a": ["A", "A", "A"], "item_b": ["B", "B", "B"],
            "first": ["a", "b", "a"], "winner": ["a", "b", "a"]}
    return pd.DataFrame({**base, **changes})


@pytest.mark.parametrize("frame,match", [
    (_frame(record_id=[1, 1, 2]), "a human label and no LLM verdict"),
    (_frame(item_b=["B", "C", "B"]), "more than one item pair"),
    (pd.concat([_frame(), _frame(judge=["y", "y", "human"], winner=["a", "b", "b"])]), "two human labels"),
    (_frame(first=["a", "a", "a"], winner=["a", "b", "a"]), "two verdicts of one judge in one display order"),
])
def test_records_the_format_cannot_hold(tmp_path, frame, match):
    with pytest.raises(DataError, match=match):
        write_judge_responses(Comparisons.from_frame(frame), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_aggregated_data_refused(tmp_path):
    counts = pd.DataFrame({"judge": ["x", "x", "human"], "item_a": ["A", "A", "A"], "item_b": ["B", "B", "B"],
                           "first": ["a", "b", "a"], "winner": ["a", "b", "a"], "count": [3, 2, 4]})
    with pytest.raises(DataError, match="aggregated"):
        write_judge_responses(Comparisons.from_counts(counts), tmp_path / "out")


def test_output_folder(panel, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        write_judge_responses(panel, tmp_path / "file")
    out = write_judge_responses(panel, tmp_path / "out")
    with pytest.raises(OutputError, match="not empty"):
        write_judge_responses(panel, out)
    small = panel.subset(judges=["judge0"])
    write_judge_responses(small, out, overwrite=True)  # replaces judge0's file, keeps the others
    assert len(_lines(out / "judge0" / "responses.jsonl")) == small.frame["judge"].astype(str).eq("judge0").sum()
    assert (out / "judge1" / "responses.jsonl").exists()
    assert not list(out.rglob("*.partial"))
