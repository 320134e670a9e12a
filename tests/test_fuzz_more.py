"""Malformed inputs of the judge-panel reader and the converters, and the typed errors of planning,
robustness studies, the bootstrap and the memory limit: each is a :class:`pydial.DialError` naming
the file or argument and what to change.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial import ArgumentError, ArgumentTypeError, Comparisons, DataError, MemoryLimitError, UnknownNameError
from pydial.cli import EXIT_DATA, main
from pydial.data import io
from pydial.data.panel import read_judge_responses
from pydial.resources import MEMORY_LIMIT_ENV, check_bytes, memory_limit
from pydial.studies import robustness

PANEL = Path(__file__).parent / "data" / "panel" / "hand" / "results"
J3 = (PANEL / "j3" / "responses.jsonl").read_bytes()  # 4 usable lines of one judge


@pytest.fixture(scope="module")
def sim_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sim") / "sim.csv"
    assert main(["simulate", str(path), "--n-llm", "200", "--n-human", "50"]) == 0
    return path


def _one_line_error(capsys, argv: list[str]) -> str:
    """Run ``pydial argv``: it fails with the data exit code and one line on stderr, returned."""
    assert main([str(a) for a in argv]) == EXIT_DATA
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


# ------------------------------------------------------------------ read_judge_responses
def test_a_long_format_csv_is_not_a_judge_response_file(sim_csv, capsys):
    for path in (sim_csv, pydial.datasets.path("arena")):
        with pytest.raises(DataError, match=r"is not a judge-response file: no line of it is a JSON object") as e:
            read_judge_responses(path)
        msg = str(e.value)
        assert Path(path).as_posix() in msg and "'record_id,judge,item_a" in msg
        assert "fields=" in msg and "pydial.read_comparisons" in msg and "model_a" in msg
    err = _one_line_error(capsys, ["judges", sim_csv])
    assert "is not a judge-response file" in err and "IndexError" not in err


def test_empty_and_missing_panel_sources_name_the_path(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("no responses here")
    for folder in ("empty", "other"):
        with pytest.raises(DataError, match=rf"{folder} holds no responses.jsonl.*<study>/results/<judge>"):
            read_judge_responses(tmp_path / folder)
    for name, text in (("empty.jsonl", b""), ("blank.jsonl", b"\n  \n\n")):
        (tmp_path / name).write_bytes(text)
        with pytest.raises(DataError, match=rf"{name} is empty \(no line but blank ones\).*JSON lines"):
            read_judge_responses(tmp_path / name)
    # an empty file among good ones is named too (it is no judge's responses)
    (tmp_path / "mixed" / "j3").mkdir(parents=True)
    (tmp_path / "mixed" / "j3" / "responses.jsonl").write_bytes(J3)
    (tmp_path / "mixed" / "j4").mkdir()
    (tmp_path / "mixed" / "j4" / "responses.jsonl").write_bytes(b"")
    with pytest.raises(DataError, match=r"mixed/j4/responses.jsonl is empty"):
        read_judge_responses(tmp_path / "mixed")


def test_a_json_array_file_is_named_with_what_the_reader_expects(tmp_path):
    path = tmp_path / "all.jsonl"
    path.write_text(json.dumps([json.loads(x) for x in J3.splitlines() if x.strip()]))
    with pytest.raises(DataError, match=r"all.jsonl is not a judge-response file.*1 non-blank line.*'\[\{"):
        read_judge_responses(path)


def test_broken_gzip_and_latin1_panel_files_name_the_file(tmp_path):
    packed = gzip.compress(J3 * 40)
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(DataError, match=r"cannot read .*cut\.jsonl\.gz"):
        read_judge_responses(tmp_path / "cut.jsonl.gz")
    (tmp_path / "plain.jsonl.gz").write_bytes(J3)
    with pytest.raises(DataError, match=r"cannot read .*plain\.jsonl\.gz"):
        read_judge_responses(tmp_path / "plain.jsonl.gz")
    lines = J3.splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"j3"', '"jé"'.encode("latin-1"))
    (tmp_path / "latin.jsonl").write_bytes(b"".join(lines))
    with pytest.raises(DataError, match=r"latin\.jsonl: it is not UTF-8 text \(.* on line 3\).*re-encode"):
        read_judge_responses(tmp_path / "latin.jsonl")


def test_a_gzip_file_without_the_gz_name_is_read(tmp_path):
    (tmp_path / "responses.jsonl").write_bytes(J3)
    ref = read_judge_responses(tmp_path / "responses.jsonl")
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "responses.jsonl").write_bytes(gzip.compress(J3))
    got = read_judge_responses(packed / "responses.jsonl")
    pd.testing.assert_frame_equal(got.to_frame(), ref.to_frame())


def test_objects_without_the_keys_suggest_fields(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(DataError, match=r"no value for 'record_id' at .*x\.jsonl:1.*pass fields="):
        read_judge_responses(tmp_path / "x.jsonl")


# ------------------------------------------------------------------------- converters
ARENA = [{"question_id": "q1", "model_a": "x", "model_b": "y", "winner": "model_a"},
         {"question_id": "q2", "model_a": "é", "model_b": "y", "winner": "tie"}]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def test_arena_and_mtbench_inputs_that_are_not_json_lines(tmp_path, capsys):
    packed = gzip.compress(_jsonl(ARENA) * 300)
    cases = {
        "cut.jsonl.gz": (packed[: len(packed) // 2], r"cannot read .*cut\.jsonl\.gz: EOFError"),
        "latin.jsonl": (_jsonl(ARENA).decode().encode("latin-1"), r"latin\.jsonl: it is not UTF-8 text .* on line 2"),
        "junk.jsonl": (b'{"question_id": "q1"}\nthis is not json {\n', r"junk\.jsonl:2 is not JSON"),
        "list.jsonl": (b"[1, 2]\n", r"list\.jsonl:1 is a JSON list, not an object"),
        "empty.jsonl": (b"\n", r"empty\.jsonl: the file is empty"),
    }
    for name, (raw, match) in cases.items():
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(DataError, match=match):
            io.from_arena({"human": tmp_path / name})
        with pytest.raises(DataError, match=match):
            io.from_mtbench(tmp_path / name)
    err = _one_line_error(capsys, ["convert", "arena", f"human={tmp_path / 'latin.jsonl'}", "--out", tmp_path / "o.csv"])
    assert "not UTF-8" in err
    (tmp_path / "packed.jsonl").write_bytes(gzip.compress(_jsonl(ARENA)))  # gzip whatever the name
    assert io.from_arena({"human": tmp_path / "packed.jsonl"})[1].kept == 2


def test_pandalm_json_that_is_not_json_names_the_file(tmp_path):
    (tmp_path / "bad.json").write_text("this is not json {")
    with pytest.raises(DataError, match=r"cannot read .*bad\.json: it is not a JSON table of records"):
        io.from_pandalm(tmp_path / "bad.json")
    (tmp_path / "latin.json").write_bytes(json.dumps([{"model1": "é"}], ensure_ascii=False).encode("latin-1"))
    with pytest.raises(DataError, match=r"latin\.json: it is not UTF-8 text"):
        io.from_pandalm(tmp_path / "latin.json")
    good = [{"question_id": 1, "model1": "a", "model2": "b", "label": 1}]
    (tmp_path / "good.json.gz").write_bytes(gzip.compress(json.dumps(good).encode()))
    assert io.from_pandalm(tmp_path / "good.json.gz")[1].kept == 1
    (tmp_path / "other.json").write_text(json.dumps([{"question_id": 1, "left": "a"}]))
    with pytest.raises(DataError, match=r"PandaLM table \(.*other\.json\): missing column\(s\) \['model1'"):
        io.from_pandalm(tmp_path / "other.json")


def test_table_detects_parquet_by_content_not_name(sim_csv, tmp_path, capsys):
    ref, _ = io.from_table(sim_csv)
    frame = pd.read_csv(sim_csv, dtype=str, keep_default_na=False)
    for name in ("parquet.csv", "parquet.data"):
        frame.to_parquet(tmp_path / name, index=False)
        got, rep = io.from_table(tmp_path / name)
        pd.testing.assert_frame_equal(got.astype(str), ref.astype(str))
    (tmp_path / "text.parquet").write_bytes(sim_csv.read_bytes())
    assert len(io.from_table(tmp_path / "text.parquet")[0]) == len(ref)
    (tmp_path / "packed.csv").write_bytes(gzip.compress(sim_csv.read_bytes()))
    assert len(io.from_table(tmp_path / "packed.csv")[0]) == len(ref)
    assert main(["convert", "table", str(tmp_path / "parquet.csv"), "--out", str(tmp_path / "long.csv")]) == 0
    raw = (tmp_path / "parquet.data").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DataError, match=r"cannot read .*cut\.parquet"):
        io.from_table(tmp_path / "cut.parquet")


def test_table_refuses_latin1_and_repeated_headers(sim_csv, tmp_path):
    raw = sim_csv.read_bytes().splitlines(keepends=True)
    raw[5] = raw[5].replace(b"item", b"it\xe9m", 1)
    (tmp_path / "latin.csv").write_bytes(b"".join(raw))
    with pytest.raises(DataError, match=r"latin\.csv: it is not UTF-8 text \(.* on line 6\)"):
        io.from_table(tmp_path / "latin.csv")
    (tmp_path / "twice.csv").write_text("record_id,judge,item_a,item_b,first,winner,judge\n1,j,x,y,a,a,k\n")
    with pytest.raises(DataError, match=r"twice\.csv has 1 column name\(s\) more than once: \['judge'\]"):
        io.from_table(tmp_path / "twice.csv")
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ["record_id", "judge", "item_a", "item_b", "first", "winner", "judge"]
    pq.write_table(pa.Table.from_arrays([pa.array([v]) for v in "1jxyaak"], names=names), tmp_path / "twice.parquet")
    with pytest.raises(DataError, match=r"more than once: \['judge'\]"):
        io.from_table(tmp_path / "twice.parquet")
    (tmp_path / "ok.csv").write_text("record_id,judge,item_a,item_b,first,winner,extra,extra\n1,j,x,y,a,a,1,2\n")
    assert len(io.from_table(tmp_path / "ok.csv")[0]) == 1  # a repeated column the reader does not use is fine


# ---------------------------------------------------------------- planning, robustness
@pytest.fixture(scope="module")
def pilot():
    sim = pydial.simulate(N=5, K=2, n_llm=600, n_human=150, seed=3)
    return sim.comparisons, pydial.fit(sim.comparisons, "dial-anc")


@pytest.mark.parametrize("bad", [pd.DataFrame({"judge": ["a"]}), "data.csv", 3])
def test_planning_and_robustness_name_data_that_is_not_comparisons(pilot, bad):
    _, res = pilot
    hint = "build it from the long table" if isinstance(bad, pd.DataFrame) else r"e\.g\. pydial\.Comparisons\.from_frame"
    for call in (lambda: pydial.plan(res, data=bad, budgets=[10]), lambda: pydial.next_pairs(res, 2, data=bad),
                 lambda: robustness.study(bad), lambda: robustness.run(bad)):
        with pytest.raises(ArgumentTypeError, match=rf"data must be a pydial.Comparisons, got {type(bad).__name__}.*{hint}"):
            call()


# ---------------------------------------------------------------------------- bootstrap
def test_bootstrap_contrast_of_an_unknown_or_repeated_item(pilot):
    data, res = pilot
    bt = res.bootstrap(4, seed=1, progress=False)
    items = list(res.items)
    with pytest.raises(UnknownNameError, match=r"item_j: unknown item 'nope'.*known items") as e:
        bt.contrast(items[0], "nope")
    assert isinstance(e.value, KeyError)
    with pytest.raises(UnknownNameError, match=r"item_i: unknown item 'ITEM00' \(did you mean 'item00'"):
        bt.contrast("ITEM00", items[1])
    with pytest.raises(ArgumentError, match="item_i and item_j are both"):
        bt.contrast(items[1], items[1])
    assert bt.contrast(items[1], items[0])["estimate"] == pytest.approx(-bt.contrast(items[0], items[1])["estimate"])


# ----------------------------------------------------------------------- memory limit
def test_one_rule_and_one_error_for_a_bad_memory_limit(sim_csv, monkeypatch, capsys):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ArgumentError) as ref:
        memory_limit()
    for call in (lambda: check_bytes(10, "x", "y"),
                 lambda: Comparisons.from_csv(sim_csv), lambda: pydial.read_comparisons(sim_csv, chunksize=100)):
        with pytest.raises(ArgumentError) as e:
            call()
        assert str(e.value) == str(ref.value) and not isinstance(e.value, DataError)
    assert "PYDIAL_MEMORY_LIMIT='plenty'" in _one_line_error(capsys, ["check", sim_csv])
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "2KB")
    assert memory_limit() == 2000
    with pytest.raises(MemoryLimitError, match=r"^reading x needs about .* capped by PYDIAL_MEMORY_LIMIT.*; read less$"):
        check_bytes(10**6, "reading x", "read less")


# ------------------------------------------------------------- keywords, record ids
def test_a_misspelt_from_frame_keyword_is_named_with_the_intended_one(sim_csv):
    frame = pd.read_csv(sim_csv)
    with pytest.raises(ArgumentTypeError, match=r"from_frame\(\) got unknown keyword argument\(s\) \['human_judg'\]; "
                                                r"did you mean 'human_judge' for 'human_judg'\? It accepts .*items"):
        Comparisons.from_frame(frame, human_judg="human")
    with pytest.raises(ArgumentTypeError, match=r"from_parquet\(\) got unknown keyword argument\(s\) \['sep'\]\. It"):
        Comparisons.from_parquet(sim_csv, sep=";")
    assert Comparisons.from_frame(df=frame, human_judge="human").N == Comparisons.from_frame(frame).N


def test_blank_record_ids_are_missing_in_every_reader(sim_csv, tmp_path):
    frame = pd.read_csv(sim_csv, dtype=str, keep_default_na=False)
    frame.loc[[1, 4], "record_id"] = ["  ", "\t"]
    frame.to_csv(tmp_path / "blank.csv", index=False)
    frame.to_parquet(tmp_path / "blank.parquet", index=False)
    for read in (lambda: Comparisons.from_frame(frame), lambda: Comparisons.from_csv(tmp_path / "blank.csv"),
                 lambda: Comparisons.from_parquet(tmp_path / "blank.parquet"),
                 lambda: pydial.read_comparisons(tmp_path / "blank.csv"),
                 lambda: pydial.read_comparisons(tmp_path / "blank.parquet")):
        with pytest.raises(DataError, match=r"missing values in column 'record_id' at rows \[1, 4\]"):
            read()
    numbers = pd.read_csv(sim_csv)  # integer ids: nothing is blank
    assert Comparisons.from_frame(numbers).N == Comparisons.from_csv(sim_csv).N


# --------------------------------------------------------------- argument checks
def test_panel_tie_rate_and_block_lines_are_checked():
    for bad, error in (("half", ArgumentTypeError), (1.5, ArgumentError), (-0.1, ArgumentError), (None, None)):
        if error is None:
            assert read_judge_responses(PANEL, max_tie_rate=bad).K >= 1
            continue
        with pytest.raises(error, match=r"max_tie_rate must be a number in \[0, 1\]"):
            read_judge_responses(PANEL, max_tie_rate=bad)
    with pytest.raises(ArgumentTypeError, match="block_lines must be an integer >= 1, got 2.5"):
        read_judge_responses(PANEL, block_lines=2.5)


@pytest.fixture(scope="module")
def both_orders():
    return pydial.simulate(N=6, K=3, n_llm=600, n_human=300, both_orders=True, seed=1)


def test_judge_diagnostics_checks_its_arguments(both_orders):
    data = both_orders.comparisons
    with pytest.raises(ArgumentTypeError, match="n_boot must be an integer >= 0, got 2.5"):
        pydial.judge_diagnostics(data, n_boot=2.5)
    with pytest.raises(ArgumentError, match="n_boot must be an integer >= 0, got -1"):
        pydial.judge_diagnostics(data, n_boot=-1)
    with pytest.raises(ArgumentTypeError, match="seed must be None, a numpy.random.Generator or a non-negative"):
        pydial.judge_diagnostics(data, seed="x")
    with pytest.raises(ArgumentTypeError, match="data must be a pydial.Comparisons, got DataFrame; build it"):
        pydial.judge_diagnostics(both_orders.to_frame() if hasattr(both_orders, "to_frame") else data.to_frame())
    a = pydial.judge_diagnostics(data, n_boot=20, seed=np.random.default_rng(5))
    b = pydial.judge_diagnostics(data, n_boot=20, seed=np.random.default_rng(5))
    pd.testing.assert_frame_equal(a, b)


def test_covariate_test_of_a_judge_against_itself():
    data = pydial.simulate(N=6, K=3, n_llm=600, n_human=300, covariates=["length"], beta=0.3, seed=1).comparisons
    res = pydial.fit(data, "dial-ada")
    with pytest.raises(ArgumentError, match="judge and against are both 'judge0'"):
        res.covariate_test("judge0", against="judge0")
    assert np.isfinite(res.covariate_test("judge0", against="judge1")["chi2"])


def test_robustness_checks_out_and_the_fit_arguments_before_any_task(both_orders, tmp_path, monkeypatch):
    data = both_orders.comparisons
    afile = tmp_path / "afile"
    afile.write_text("x")

    def no_task(*args, **kwargs):
        raise AssertionError("a task ran")

    monkeypatch.setattr(robustness, "run_task", no_task)
    with pytest.raises(pydial.OutputError, match=rf"cannot write the output folder {afile}: it is a file; name a folder"):
        robustness.run(data, ["display"], splits=1, out=afile)
    with pytest.raises(pydial.OutputError, match=rf"cannot write the output folder {afile / 'sub'}: Not a directory"):
        robustness.run(data, ["display"], splits=1, out=afile / "sub")
    assert afile.read_text() == "x"
    for kwargs, error, text in (({"rank": -1}, ArgumentError, "rank must be an integer >= 0, got -1"),
                                ({"rank": 1.5}, ArgumentTypeError, "rank must be an integer"),
                                ({"splits": "2"}, ArgumentTypeError, "splits must be an integer >= 1"),
                                ({"seed": "x"}, ArgumentTypeError, "seed must be None or a non-negative integer"),
                                ({"train_frac": 1.0}, ArgumentError, r"train_frac \(1.0\) must be in the open"),
                                ({"methods": {"x": ("dial-anc", {"lambda_": -1})}}, ArgumentError, "lambda_"),
                                ({"methods": {"x": ("dial-anc", {"lamda": 1})}}, ArgumentTypeError, "lamda")):
        with pytest.raises(error, match=text):
            robustness.run(data, ["display"], **{"splits": 1, **kwargs})


# ------------------------------------------------------------------ arviz's log lines
def test_one_chain_diagnostics_leave_out_arviz_log_lines():
    """R-hat of one chain: pydial reports it; arviz's "Shape validation failed" line is held back."""
    import logging

    from pydial.stan import idata

    az = idata.arviz()
    seen: list[logging.LogRecord] = []
    catch = logging.Handler()
    catch.emit = seen.append  # type: ignore[method-assign]
    loggers = [x for x in (getattr(az, "_log", None), *map(logging.getLogger, idata.ARVIZ_LOGGERS))
               if isinstance(x, logging.Logger)]
    for x in loggers:
        x.addHandler(catch)
    try:
        draws = np.random.default_rng(0).normal(size=(1, 100, 3))
        rhat, bulk, _ = idata.rhat_ess(draws)
        idata.bfmi(draws[:, :, 0])
        assert rhat.shape == bulk.shape == (3,) and not seen, [r.getMessage() for r in seen]
        with idata.quiet_arviz():
            logging.getLogger("arviz").error("kept")
        assert [r.getMessage() for r in seen] == ["kept"]  # errors still pass
        seen.clear()
        for x in loggers:
            x.warning("after the block")
        assert len(seen) == len(loggers)  # the filter is removed afterwards
    finally:
        for x in loggers:
            x.removeHandler(catch)
