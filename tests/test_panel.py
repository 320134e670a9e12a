"""pydial.read_judge_responses: the released judge-panel format, counted by hand.

tests/data/panel/hand/results holds three judges written by hand:

* j1 (12 lines, 11 non-blank): R1 both orders (X wins twice); R2 both orders (X first wins,
  then Z first wins) and a duplicate of R2's swapped line; a blank line 5; R3 a tie then
  "both bad"; R4 one order; line 10 a truncated JSON line; R5 an unparseable verdict then
  a usable one.  -> 10 JSON lines, 1 duplicate, 1 unparseable, 8 usable (1 tie, 1 both
  bad), 5 records, 2 (R4, R5) judged in one order only.
* j2: 2 lines, both unparseable -> no usable verdict.
* j3: 4 usable verdicts, 3 ties (tie rate 0.75).

Human labels: R1 model_a, R2 model_b, R3 tie, R4 both_bad, R5 model_b.
tests/data/panel/real holds lines copied from the released collection (see LICENSE there).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import pydial
from pydial.data.panel import panel_counts, panel_files
from pydial.exceptions import ArgumentError, DataError

DATA = Path(__file__).parent / "data" / "panel"
HAND = DATA / "hand" / "results"
REAL = DATA / "real" / "mt_bench" / "results"


def _line(record: str, a: str, b: str, human: str, judge: str, a_first: bool, choice: str | None, verdict: str | None,
          **extra) -> str:
    return json.dumps({"record_id": record, "model_a": a, "model_b": b, "human_winner": human, "judge": judge,
                       "response_order_default": a_first, "choice": choice, "canonical_verdict": verdict, **extra})


def _summary(data) -> dict:
    return data.summary()["value"].to_dict()


def test_hand_collection_counts():
    data = pydial.read_judge_responses(HAND)
    s = _summary(data)
    assert s["panel: files read"] == 3
    assert s["panel: lines read"] == 17  # 11 + 2 + 4 non-blank lines
    assert s["panel: lines that are not JSON objects (left out)"].startswith("1 at ")
    assert "hand/results/j1/responses.jsonl:10" in s["panel: lines that are not JSON objects (left out)"]
    assert s["panel: duplicate lines of a (record, judge, order) (first kept)"] == "1 (j1 1)"
    assert s["panel: unparseable verdicts (left out)"] == "3 (j2 2, j1 1)"
    assert s["panel: judges without a usable verdict (left out)"] == "j2"
    assert s["panel: records a judge judged in one order only"] == "2 (j1 2)"
    assert s["panel: LLM verdicts kept"] == 12
    assert s["panel: records without a human label (no human row)"] == 0
    assert data.judges == ("j1", "j3") and data.items == ("X", "Y", "Z")
    assert s["LLM judgments"] == 12 and s["LLM ties"] == 4 and s["LLM both bad"] == 1
    assert s["human ties"] == 1 and s["human both bad"] == 1 and data.n_human == 3
    c = panel_counts(data)
    assert c.loc["j1"].to_dict() | {"tie_rate": 0.125} == {
        "lines": 10, "duplicates": 1, "unparseable": 1, "usable": 8, "ties": 1, "both_bad": 1, "tie_rate": 0.125,
        "records": 5, "one_order_records": 2, "kept": 8, "excluded": ""}
    assert c.loc["j2", "excluded"] == "no usable verdict" and c.loc["j2", "unparseable"] == 2
    assert c.loc["j3", ["usable", "ties"]].tolist() == [4, 3] and c.loc["j3", "tie_rate"] == 0.75


def test_rows_one_human_row_per_record_and_first_shown():
    rows = pydial.read_judge_responses(HAND).to_frame()
    human = rows[rows["judge"] == "human"].set_index("record_id")
    assert sorted(human.index) == ["R1", "R2", "R3", "R4", "R5"]
    assert human.loc["R1", "winner"] == "a" and human.loc["R3", "winner"] == "tie"
    assert human.loc["R4", "winner"] == "both_bad"
    # R4 is (Y, X) in the file: canonical (X, Y) and model_b = X won, so X (item_a of the canonical row) wins
    assert (human.loc["R4", "item_a"], human.loc["R4", "item_b"]) == ("X", "Y")
    j1 = rows[(rows["judge"] == "j1") & (rows["record_id"] == "R2")]
    # R2 (X, Z): shown X first -> X wins; shown Z first -> Z wins (the duplicate, X wins, is left out)
    assert sorted(zip(j1["first"], j1["winner"])) == [("a", "a"), ("b", "b")]
    r4 = rows[(rows["judge"] == "j1") & (rows["record_id"] == "R4")].iloc[0]
    # R4 file line: Y shown first, choice b -> X (model_b) won; canonical (X, Y): X second and X wins
    assert (r4["item_a"], r4["first"], r4["winner"]) == ("X", "b", "a")


def test_panel_rules_remove_and_count():
    tied = pydial.read_judge_responses(HAND, max_tie_rate=0.5)
    s = _summary(tied)
    assert tied.judges == ("j1",)
    assert s["panel: judges with tie rate > 0.5 (left out)"] == "j3 (0.750 of 4 verdicts)"
    assert s["panel: LLM verdicts kept"] == 8
    assert panel_counts(tied).loc["j3", "excluded"] == "tie rate > 0.5"
    both = pydial.read_judge_responses(HAND, require_both_orders=True)
    s = _summary(both)
    assert s["panel: verdicts left out by require_both_orders"] == 2  # R4 and R5 of j1
    assert s["panel: LLM verdicts kept"] == 10
    assert panel_counts(both).loc["j1", "kept"] == 6
    assert "panel: judges with tie rate > None (left out)" not in s


def test_real_lines_and_the_papers_tie_rule():
    data = pydial.read_judge_responses(REAL)
    s = _summary(data)
    assert s["panel: lines read"] == 19 and s["panel: LLM verdicts kept"] == 19
    # stablelm2 has no original-order line for record 39a3185d
    assert s["panel: records a judge judged in one order only"] == "1 (ollama-stablelm2-12b-direct 1)"
    assert data.n_human == 5 and len(data.record_ids) == 5
    assert data.items == ("alpaca-13b", "claude-v1", "gpt-3.5-turbo", "llama-13b", "vicuna-13b-v1.2")
    c = panel_counts(data)
    assert c.loc["ollama-stablelm2-12b-direct", ["usable", "ties"]].tolist() == [9, 6]
    kept = pydial.read_judge_responses(REAL, max_tie_rate=0.5)  # the paper excludes StableLM 2 this way
    assert kept.judges == ("ollama-phi4-14b-direct",)


def test_sources_file_list_folder_and_gzip(tmp_path):
    one = pydial.read_judge_responses(REAL / "ollama-phi4-14b-direct" / "responses.jsonl")
    assert one.judges == ("ollama-phi4-14b-direct",) and one.n_llm == 10
    files = [REAL / "ollama-phi4-14b-direct" / "responses.jsonl", REAL / "ollama-stablelm2-12b-direct"]
    assert pydial.read_judge_responses(files).n_llm == pydial.read_judge_responses(REAL).n_llm
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(REAL / "ollama-phi4-14b-direct" / "responses.jsonl", flat / "phi4.jsonl")
    with open(REAL / "ollama-stablelm2-12b-direct" / "responses.jsonl", "rb") as src, \
            gzip.open(flat / "stablelm.jsonl.gz", "wb") as dst:
        dst.write(src.read())
    (flat / "notes.txt").write_text("not read")
    assert [p.name for p in panel_files(flat)] == ["phi4.jsonl", "stablelm.jsonl.gz"]
    assert _summary(pydial.read_judge_responses(flat))["panel: lines read"] == 19
    (tmp_path / "results" / "j").mkdir(parents=True)
    (tmp_path / "results" / "j" / "errors.jsonl").write_text("{}\n")
    shutil.copy(flat / "phi4.jsonl", tmp_path / "results" / "j" / "responses.jsonl")
    assert [p.name for p in panel_files(tmp_path / "results")] == ["responses.jsonl"]  # errors.jsonl is not read
    with pytest.raises(DataError, match="does not exist"):
        pydial.read_judge_responses(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no responses.jsonl"):
        pydial.read_judge_responses(tmp_path / "empty")


def test_line_by_line_path_agrees_with_pyarrow(tmp_path):
    """A value of another JSON type (an integer record id) sends the file through json: same result."""
    lines = [_line("1", "X", "Y", "model_a", "j", True, "a", "model_a"),
             _line("1", "X", "Y", "model_a", "j", False, "a", "model_b"),
             _line("2", "Y", "Z", "model_b", "j", True, "b", "model_b")]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines).replace('"record_id": "1"', '"record_id": 1') + "\n")
    a = pydial.read_judge_responses(tmp_path / "a.jsonl").to_frame()
    b = pydial.read_judge_responses(tmp_path / "b.jsonl", block_lines=2).to_frame()
    assert a.equals(b)


def test_disagreeing_human_labels_and_items_name_the_records(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text(_line("R1", "X", "Y", "model_a", "j", True, "a", "model_a") + "\n"
                 + _line("R1", "X", "Y", "model_b", "k", True, "a", "model_a") + "\n")
    with pytest.raises(DataError, match=r"\['R1'\].*different human labels"):
        pydial.read_judge_responses(f)
    f.write_text(_line("R1", "X", "Y", "model_a", "j", True, "a", "model_a") + "\n"
                 + _line("R1", "X", "Z", "model_a", "k", True, "a", "model_a") + "\n")
    with pytest.raises(DataError, match=r"\['R1'\].*different items"):
        pydial.read_judge_responses(f)


def test_malformed_fields_raise_with_file_and_line(tmp_path):
    f = tmp_path / "x.jsonl"
    # choice a with X shown second names Y, but the verdict says X
    f.write_text(_line("R1", "X", "Y", "model_a", "j", True, "a", "model_a") + "\n\n"
                 + _line("R1", "X", "Y", "model_a", "j", False, "a", "model_a") + "\n")
    with pytest.raises(DataError, match=r"contradicts the choice.*x.jsonl:3 \(1 line"):
        pydial.read_judge_responses(f)
    f.write_text(_line("R1", "X", "Y", "model_a", "j", True, "a", "model_a").replace('"record_id": "R1", ', "") + "\n")
    with pytest.raises(DataError, match=r"no value for 'record_id' at .*x.jsonl:1"):
        pydial.read_judge_responses(f)
    f.write_text(_line("R1", "X", "Y", "winner_x", "j", True, "a", "model_a") + "\n")
    with pytest.raises(DataError, match=r"unknown human label\(s\) \['winner_x'\]"):
        pydial.read_judge_responses(f)
    f.write_text(_line("R1", "X", "Y", "model_a", "human", True, "a", "model_a") + "\n")
    with pytest.raises(DataError, match="named 'human'"):
        pydial.read_judge_responses(f)
    f.write_text(_line("R1", "X", "Y", "model_a", "j", True, None, "maybe") + "\n")
    with pytest.raises(DataError, match="no usable verdict"):
        pydial.read_judge_responses(f)


def test_a_missing_verdict_is_taken_from_the_choice(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text(_line("R1", "X", "Y", "model_a", "j", False, "a", None) + "\n")  # Y shown first and chosen
    rows = pydial.read_judge_responses(f).to_frame()
    assert rows.loc[rows["judge"] == "j", "winner"].tolist() == ["b"]


def test_a_similar_format_through_fields_and_labels(tmp_path):
    rows = [{"id": "q1", "left": "X", "right": "Y", "gold": "L", "grader": "g", "shown_first": "left", "pick": "L"},
            {"id": "q1", "left": "X", "right": "Y", "gold": "L", "grader": "g", "shown_first": "right", "pick": "R"}]
    f = tmp_path / "other.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = pydial.read_judge_responses(
        f, fields={"record_id": "id", "item_a": "left", "item_b": "right", "human": "gold", "judge": "grader",
                   "order": "shown_first", "verdict": "pick"},
        verdict_labels={"L": "a", "R": "b", "=": "tie"}, order_labels={"left": "a", "right": "b"})
    out = data.to_frame().sort_values(["judge", "first"])
    assert out[["judge", "first", "winner"]].values.tolist() == [["g", "a", "a"], ["g", "b", "b"], ["human", "a", "a"]]
    with pytest.raises(ArgumentError, match="unknown field"):
        pydial.read_judge_responses(f, fields={"question": "id"})
    with pytest.raises(ArgumentError, match="verdict_labels"):
        pydial.read_judge_responses(f, verdict_labels={"L": "left"})
    with pytest.raises(ArgumentError, match="max_tie_rate"):
        pydial.read_judge_responses(f, max_tie_rate=1.5)


def test_block_size_does_not_change_the_result():
    a = pydial.read_judge_responses(HAND, block_lines=1)
    b = pydial.read_judge_responses(HAND)
    assert a.to_frame().equals(b.to_frame()) and _summary(a) == _summary(b)
    assert np.array_equal(a.llm.n, b.llm.n)


def test_panel_counts_needs_a_panel_read():
    with pytest.raises(DataError, match="read_judge_responses"):
        panel_counts(pydial.Comparisons.from_frame(pydial.read_judge_responses(HAND).to_frame()))


def test_command_line_judges(tmp_path, capsys):
    from pydial.cli import main

    out = tmp_path / "diag"
    assert main(["judges", str(HAND), "--out", str(out), "--n-boot", "50", "--max-tie-rate", "0.5"]) == 0
    printed = capsys.readouterr().out
    assert "panel: judges with tie rate > 0.5 (left out)" in printed and "j3 (0.750 of 4 verdicts)" in printed
    assert {p.name for p in out.iterdir()} >= {"judges.csv", "judges.png", "panel_counts.csv", "data_summary.csv"}
    import pandas as pd

    table = pd.read_csv(out / "judges.csv", index_col="judge")
    assert list(table.index) == ["j1"] and table.loc["j1", "swap_inconsistency"] == 0.5
    assert main(["judges", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
