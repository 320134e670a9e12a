"""The command line never gives a silent wrong answer: reproductions as CLI runs
(exit code, one line, no traceback), safe outputs, and a bounded fuzz."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydial.cli import EXIT_DATA, EXIT_FIT, EXIT_IDENT, main
from pydial.outputs import MARKER


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return code, out, err


def last_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def sim_csv(tmp_path_factory) -> Path:
    """``pydial simulate s.csv -N 6 -K 3 --n-llm 3000 --n-human 400 --seed 1``."""
    p = tmp_path_factory.mktemp("sim") / "s.csv"
    assert main(["simulate", str(p), "-N", "6", "-K", "3", "--n-llm", "3000", "--n-human", "400", "--seed", "1"]) == 0
    return p


def variant(sim_csv: Path, tmp_path: Path, edit) -> Path:
    df = pd.read_csv(sim_csv, dtype=str, keep_default_na=False)
    df = edit(df)
    p = tmp_path / "v.csv"
    df.to_csv(p, index=False)
    return p


# ------------------------------------------------------------------------------ names
def test_whitespace_names_do_not_split_judges(sim_csv, tmp_path, capsys):
    def edit(d):
        h = d.index[d.judge == "human"]
        d.loc[h[::2], "judge"] = "human "
        d.loc[d.judge == "judge0", "judge"] = "judge0 "
        return d

    code, out, err = run(capsys, "check", variant(sim_csv, tmp_path, edit), "--method", "dial-anc")
    assert code == 0 and "design ok" in out
    assert "pydial: warning: surrounding whitespace stripped from 2 judge name(s)" in err
    assert out.count(" ident-LLM ") == 3  # judges judge0, judge1, judge2: no fourth "human" or "judge0 "


def test_case_variant_refused_with_one_line(sim_csv, tmp_path, capsys):
    def edit(d):
        d.loc[d.index[:20][d.judge.iloc[:20] == "judge1"], "judge"] = "Judge1"
        return d

    code, out, err = run(capsys, "fit", variant(sim_csv, tmp_path, edit))
    assert code == EXIT_DATA and len(err.strip().splitlines()) == 1
    assert "'Judge1', 'judge1'" in err and "--allow-similar-names" in err


def test_retyped_item_names_kept(sim_csv, tmp_path, capsys):
    names = {"item00": "3.1", "item01": "3.10", "item02": "007", "item03": "7", "item04": "4", "item05": "5"}

    def edit(d):
        d["item_a"], d["item_b"] = d.item_a.map(names), d.item_b.map(names)
        return d

    code, out, err = run(capsys, "fit", variant(sim_csv, tmp_path, edit), "--method", "human")
    assert code == 0, err
    for name in ("3.1 ", "3.10 ", "007 ", "7 ", "4 ", "5 "):
        assert "\n" + name in out


def test_integer_human_judge(sim_csv, tmp_path, capsys):
    def edit(d):
        d["judge"] = d.judge.map({"human": "0", "judge0": "1", "judge1": "2", "judge2": "3"})
        return d

    code, out, err = run(capsys, "fit", variant(sim_csv, tmp_path, edit), "--method", "human", "--human", "0")
    assert code == 0 and "n_H=400" in out


def test_empty_file_exit_2(tmp_path, capsys):
    p = tmp_path / "empty.csv"
    p.write_text("")
    code, _, err = run(capsys, "fit", p)
    assert code == EXIT_DATA and "empty" in err and len(err.strip().splitlines()) == 1


def test_ties_only_judge_and_drop_empty_judges(sim_csv, tmp_path, capsys):
    def edit(d):
        d.loc[d.judge == "judge2", "winner"] = "tie"
        return d

    p = variant(sim_csv, tmp_path, edit)
    code, _, err = run(capsys, "check", p, "--method", "dial-anc")
    assert code == EXIT_DATA and "--drop-empty-judges" in err
    code, out, err = run(capsys, "check", p, "--method", "dial-anc", "--rank", "0", "--drop-empty-judges")
    assert code == 0 and "judge2" not in out


def test_duplicates_flag(sim_csv, tmp_path, capsys):
    p = variant(sim_csv, tmp_path, lambda d: pd.concat([d, d.iloc[:4]]))
    code, _, err = run(capsys, "check", p, "--method", "human")
    assert code == 0 and "4 duplicated row(s)" in err
    code, _, err = run(capsys, "check", p, "--method", "human", "--duplicates", "raise")
    assert code == EXIT_DATA and "4 duplicated row(s)" in err


# ---------------------------------------------------------------------------- verdicts
def test_first_shown_judge(sim_csv, tmp_path, capsys):
    def edit(d):
        m = d.judge == "judge0"
        d.loc[m, "winner"] = d.loc[m, "first"]
        return d

    p = variant(sim_csv, tmp_path, edit)
    code, _, err = run(capsys, "fit", p, "--method", "dial-anc")
    assert code == EXIT_IDENT and "'judge0'" in err and "not identified" in err
    code, out, err = run(capsys, "fit", p, "--method", "dial-anc", "--no-check")
    assert code == EXIT_FIT and len(err.strip().splitlines()) == 1
    assert "judge 'judge0'" in err and "box bound" in err and "--allow-nonconverged" in err
    assert "pydial fit:" not in out  # no numbers printed
    out_dir = tmp_path / "kept"
    code, out, err = run(capsys, "fit", p, "--method", "dial-anc", "--no-check", "--allow-nonconverged", "--out", out_dir)
    assert code == 0 and "NOT A VALID FIT" in out
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["status"] != "ok" and any("judge0" in x for x in summary["problems"])


def test_total_order_exit_4(sim_csv, tmp_path, capsys):
    p = variant(sim_csv, tmp_path, lambda d: d.assign(winner=np.where(d.item_a < d.item_b, "a", "b")))
    for method in ("pooled", "dial-anc"):
        code, out, err = run(capsys, "fit", p, "--method", method)
        assert code == EXIT_FIT, (method, err)
        assert len(err.strip().splitlines()) == 1 and "pydial fit:" not in out


def test_one_record_id_exit_4(sim_csv, tmp_path, capsys):
    p = variant(sim_csv, tmp_path, lambda d: d.assign(record_id="r1"))
    code, _, err = run(capsys, "fit", p, "--method", "dial-anc", "--cov-type", "record")
    assert code == EXIT_FIT and "degenerate covariance" in last_line(err) and "1 independent cluster" in err


def test_lambdas_argument_errors(sim_csv, capsys):
    code, _, err = run(capsys, "fit", sim_csv, "--lambda", "0,1")
    assert code == EXIT_DATA and "lambda_ must be" in err


def test_old_option_names_are_usage_errors(sim_csv, capsys):
    """``--lambdas``, ``--cov`` and ``compare --model`` are not options (``--lambda``, ``--cov-type``, ``--method``)."""
    for argv in (("fit", sim_csv, "--lambdas", "0,1"), ("fit", sim_csv, "--cov", "binomial"),
                 ("compare", sim_csv, "--model", "human")):
        code, err = outcome(capsys, *argv)
        assert code == EXIT_DATA and f"pydial {argv[0]}: error:" in err


# ------------------------------------------------------------------------------ outputs
@pytest.mark.parametrize("where", ["file", "under-file", "unwritable", "folder-in-way", "foreign"])
def test_bad_output_folder_refused_before_fitting(sim_csv, tmp_path, capsys, where):
    f = tmp_path / "afile"
    f.write_text("x")
    out = {"file": f, "under-file": f / "sub", "unwritable": Path("/proc/pydial-out"),
           "folder-in-way": tmp_path / "trap", "foreign": tmp_path / "foreign"}[where]
    if where == "folder-in-way":
        (out / "scores.csv").mkdir(parents=True)
    if where == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    code, out_text, err = run(capsys, "fit", sim_csv, "--method", "human", "--out", out)
    assert code == EXIT_DATA and len(err.strip().splitlines()) == 1 and str(out) in err
    assert "pydial fit:" not in out_text  # refused before fitting
    if where == "folder-in-way":
        code, _, err = run(capsys, "fit", sim_csv, "--method", "human", "--out", out, "--force")
        assert code == EXIT_DATA and "in the way" in err


@pytest.mark.parametrize("command", ["fit", "plan", "compare"])
def test_out_on_an_existing_file_exit_2_before_fitting(sim_csv, tmp_path, capsys, command):
    f = tmp_path / "results"
    f.write_text("keep me")
    code, out_text, err = run(capsys, command, sim_csv, "--out", f)
    assert code == EXIT_DATA and len(err.strip().splitlines()) == 1 and str(f) in err and "is a file" in err
    assert out_text == ""  # nothing fitted, nothing printed
    assert f.read_text() == "keep me"


def test_force_into_foreign_folder_keeps_other_files(sim_csv, tmp_path, capsys):
    out = tmp_path / "foreign"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "gacv.csv").write_text("stale")
    code, _, err = run(capsys, "fit", sim_csv, "--method", "human", "--out", out, "--force")
    assert code == 0, err
    names = {p.name for p in out.iterdir()}
    assert "notes.txt" in names and "scores.csv" in names and "gacv.csv" not in names and MARKER not in names


def test_refit_replaces_the_folder_as_a_whole(sim_csv, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(capsys, "fit", sim_csv, "--method", "dial-anc", "--out", out)[0] == 0
    assert (out / "position_effects.csv").exists() and (out / "consensus_loadings.csv").exists()
    assert run(capsys, "fit", sim_csv, "--method", "human", "--out", out)[0] == 0
    names = {p.name for p in out.iterdir()}
    assert "position_effects.csv" not in names and "consensus_loadings.csv" not in names
    assert json.loads((out / "summary.json").read_text())["method"] == "human"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no temporary left behind


def test_failed_fit_leaves_old_output(sim_csv, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(capsys, "fit", sim_csv, "--method", "human", "--out", out)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = variant(sim_csv, tmp_path, lambda d: d.assign(record_id="r1"))
    assert run(capsys, "fit", bad, "--method", "dial-anc", "--cov-type", "record", "--out", out)[0] == EXIT_FIT
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("command", ["simulate", "convert"])
def test_simulate_and_convert_paths(sim_csv, tmp_path, capsys, command):
    f = tmp_path / "afile"
    f.write_text("x")
    for target in (tmp_path, f / "x.csv", Path("/proc/pydial.csv")):
        argv = (["simulate", target, "-N", "3", "-K", "2"] if command == "simulate"
                else ["convert", "table", sim_csv, "--out", target])
        code, _, err = run(capsys, *argv)
        assert code == EXIT_DATA and len(err.strip().splitlines()) == 1 and str(target) in err
    target = tmp_path / "new" / "o.csv"
    argv = (["simulate", target, "-N", "3", "-K", "2", "--n-llm", "60", "--n-human", "10"] if command == "simulate"
            else ["convert", "table", sim_csv, "--out", target])
    assert run(capsys, *argv)[0] == 0 and len(pd.read_csv(target)) > 0
    assert [p.name for p in target.parent.iterdir()] == ["o.csv"]


# --------------------------------------------------------------------------------- fuzz
NAMES = st.sampled_from(["a", "b", "c", "d", " a", "A", "NA", "None", "007", "7", "3.10", "human", "human "])
NOISY = st.lists(
    st.tuples(st.sampled_from(["g1", "g2", "g3", "human", "human ", "G1"]), NAMES, NAMES,
              st.sampled_from(["a", "b", "", "x"]), st.sampled_from(["a", "b", "tie", "both_bad", "", "?"])),
    min_size=0, max_size=60)
FULL = [(j, x, y, f) for j in ("g1", "g2", "human") for x, y in
        (("NA", "007"), ("007", "7"), ("7", "3.10"), ("NA", "7"), ("007", "3.10"), ("NA", "3.10")) for f in ("a", "b")]
# every judge on every pair in both orders, winners at random (ties, separation and
# one-sided judges arise by chance)
CLEAN = st.lists(st.sampled_from(["a", "a", "b", "b", "tie"]), min_size=len(FULL), max_size=len(FULL)).map(
    lambda ws: [(*row, w) for row, w in zip(FULL, ws)])
ROWS = st.one_of(NOISY, CLEAN, CLEAN, CLEAN)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(rows=ROWS, method=st.sampled_from(["human", "judges", "pooled", "dial-anc"]),
       repeat=st.integers(1, 4), cov=st.sampled_from(["cell", "binomial", "record"]))
def test_fuzz_cli(tmp_path_factory, rows, method, repeat, cov):
    tmp = tmp_path_factory.mktemp("fuzz")
    df = pd.DataFrame([(k, *r) for k, r in enumerate(rows * repeat)],
                      columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])
    p = tmp / "f.csv"
    df.to_csv(p, index=False)
    out = tmp / "out"
    import io
    from contextlib import redirect_stderr, redirect_stdout

    so, se = io.StringIO(), io.StringIO()
    with redirect_stdout(so), redirect_stderr(se):
        code = main(["fit", str(p), "--method", method, "--rank", "0", "--cov-type", cov, "--out", str(out)])
    assert code in (0, EXIT_DATA, EXIT_IDENT, EXIT_FIT)
    assert "Traceback" not in se.getvalue()
    if code:
        assert se.getvalue().strip() and not out.exists()
    else:
        scores = pd.read_csv(out / "scores.csv")
        assert np.isfinite(scores["score"]).all() and (scores["se"] > 0).all()
        assert json.loads((out / "summary.json").read_text())["status"] == "ok"


def test_convert_table_keeps_names_as_written(sim_csv, tmp_path, capsys):
    names = {"item00": "007", "item01": "7", "item02": "NA", "item03": "3.10", "item04": "3.1", "item05": "None"}
    p = variant(sim_csv, tmp_path, lambda d: d.assign(item_a=d.item_a.map(names), item_b=d.item_b.map(names)))
    out = tmp_path / "long.csv"
    assert run(capsys, "convert", "table", p, "--out", out)[0] == 0
    back = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert set(back.item_a) | set(back.item_b) == set(names.values())


# ------------------------------------------------------------------- one line, documented code
def outcome(capsys, *argv) -> tuple[int, str]:
    """Run ``pydial argv`` in-process: the exit code (argparse's SystemExit included) and stderr."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return code, err


@pytest.mark.parametrize("argv, prefix", [
    (["fit", "{sim}", "--bogus"], "pydial fit: error: unrecognized arguments: --bogus"),
    (["fit"], "pydial fit: error: the following arguments are required: data"),
    ([], "pydial: error: the following arguments are required: COMMAND"),
    (["fitt", "{sim}"], "pydial: error: argument COMMAND: invalid choice: 'fitt'"),
    (["fit", "{sim}", "--method", "dial"], "pydial fit: error: argument --method: invalid choice: 'dial'"),
    (["plan", "{sim}", "--budgets", "1.5"], "pydial plan: error: argument --budgets: expected comma-separated integers"),
    (["check", "{sim}", "--seed", "-1"], "pydial check: error: argument --seed: seed must be in [0, 2**32)"),
    (["plan", "{sim}", "--next", "-1"], "pydial plan: error: argument --next: expected an integer >= 0, got '-1'"),
    (["judges", "{sim}", "--n-boot", "x"], "pydial judges: error: argument --n-boot: expected an integer >= 0, got 'x'"),
    (["simulate", "x.csv", "-N"], "pydial simulate: error: argument --items/-N: expected one argument"),
    (["convert", "yaml", "x"], "pydial convert: error: argument format: invalid choice: 'yaml'"),
])
def test_usage_errors_are_one_line(sim_csv, capsys, argv, prefix):
    code, err = outcome(capsys, *(a.format(sim=sim_csv) for a in argv))
    command = prefix.split(":")[0]
    assert code == EXIT_DATA and len(err.strip().splitlines()) == 1, err
    assert err.startswith(prefix) and err.rstrip().endswith(f"(see {command} --help)")
    assert "usage:" not in err


def _bad_human(d):
    d.loc[d.judge == "human", "first"] = ""
    return d


def _total_order(d):
    return d.assign(winner=np.where(d.item_a < d.item_b, "a", "b"))


@pytest.mark.parametrize("case, code, text", [
    ("missing file", EXIT_DATA, "cannot read"),
    ("folder as data", EXIT_DATA, "cannot read"),
    ("wrong --human", EXIT_DATA, "no rows have judge 'people'"),
    ("wrong --human, display orders given", EXIT_DATA, "no decisive rows have judge == 'people'"),
    ("level", EXIT_DATA, "level (2.0) must be in the open interval (0, 1)"),
    ("lambda", EXIT_DATA, "lambda_ must be"),
    ("rank too large", EXIT_IDENT, "not identifiable:"),
    ("total order", EXIT_FIT, "fit failed (pooled)"),
    ("out is a file", EXIT_DATA, "is a file"),
    ("unknown plan target", EXIT_DATA, "unknown item"),
    ("interrupted", 130, "pydial: interrupted"),
])
def test_user_errors_end_in_one_line_and_a_documented_code(sim_csv, tmp_path, capsys, monkeypatch, case, code, text):
    afile = tmp_path / "afile"
    afile.write_text("x")
    argv = {
        "missing file": lambda: ["fit", tmp_path / "none.csv"],
        "folder as data": lambda: ["fit", tmp_path],
        "wrong --human": lambda: ["fit", variant(sim_csv, tmp_path, _bad_human), "--human", "people"],
        "wrong --human, display orders given": lambda: ["fit", sim_csv, "--human", "people"],
        "level": lambda: ["fit", sim_csv, "--method", "human", "--level", "2"],
        "lambda": lambda: ["fit", sim_csv, "--lambda", "-1"],
        "rank too large": lambda: ["fit", sim_csv, "--rank", "9"],
        "total order": lambda: ["fit", variant(sim_csv, tmp_path, _total_order), "--method", "pooled"],
        "out is a file": lambda: ["fit", sim_csv, "--out", afile],
        "unknown plan target": lambda: ["plan", sim_csv, "--target", "itemXX - item01"],
        "interrupted": lambda: ["check", sim_csv],
    }[case]()
    if case == "interrupted":
        import pydial.model.identifiability as ident

        def interrupt(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(ident, "check_design", interrupt)
    got, err = outcome(capsys, *argv)
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("pydial: warning:")]
    assert got == code and len(lines) == 1 and text in lines[0], (case, err)


def test_wrong_human_name_lists_the_judges(sim_csv, tmp_path, capsys):
    """Not "missing values in column 'first'" alone: the human judge's name is the likely mistake."""
    code, err = outcome(capsys, "check", variant(sim_csv, tmp_path, _bad_human), "--human", "people")
    assert code == EXIT_DATA and len(err.strip().splitlines()) == 1
    assert err.startswith("pydial: bad input: no rows have judge 'people', the human judge (human_judge= / --human)")
    found = err.split("the judges found are ")[1].split(".")[0]
    assert sorted(found.split(", ")) == ["'human'", "'judge0'", "'judge1'", "'judge2'"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("command", ["fit", "plan", "simulate"])
def test_write_errors_name_the_output(sim_csv, tmp_path, capsys, monkeypatch, code, command):
    """A full disk (quota, read-only, no permission) while writing: one line naming the path, exit 2, old output kept."""
    out = tmp_path / ("o.csv" if command == "simulate" else "out")
    argv = {"fit": ["fit", sim_csv, "--method", "human", "--out", out],
            "plan": ["plan", sim_csv, "--budgets", "100", "--out", out],
            "simulate": ["simulate", out, "-N", "3", "-K", "2", "--n-llm", "60", "--n-human", "10"]}[command]
    assert outcome(capsys, *argv)[0] == 0
    before = sorted(p.name for p in tmp_path.iterdir())

    def full(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    got, err = outcome(capsys, *argv)
    assert got == EXIT_DATA and err == f"pydial: cannot write {out}: {os.strerror(code)}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # the earlier output stays, no temporary left


def test_write_error_outside_the_output_helpers_names_out(sim_csv, tmp_path, capsys, monkeypatch):
    """``robustness`` appends to its folder itself: an unnamed write error still names ``--out``."""
    import pydial.studies.robustness as robustness

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(robustness, "command", full)
    got, err = outcome(capsys, "robustness", sim_csv, "--out", tmp_path / "rob")
    assert got == EXIT_DATA and err == f"pydial: cannot write {tmp_path / 'rob'}: No space left on device\n"


def test_a_request_too_large_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    """simulate past the memory limit: refused before drawing, one line naming the estimate, exit 2."""
    monkeypatch.setenv("PYDIAL_MEMORY_LIMIT", "50MB")
    code = main(["simulate", "--n-llm", "1000000000000", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("pydial: too large:")
    assert not (tmp_path / "x.csv").exists()


def _disconnected_humans(d):
    """Human labels only within {item00, item01, item02} and within the other items: two components."""
    low = {"item00", "item01", "item02"}
    human = d.judge == "human"
    return d[~human | (d.item_a.isin(low) == d.item_b.isin(low))]


@pytest.mark.parametrize("case", ["rank too large", "disconnected human labels", "two ranks too large"])
def test_check_of_an_impossible_design_is_one_line(sim_csv, tmp_path, capsys, case):
    """The headline and its reasons on one stderr line; the design table stays on stdout."""
    argv, texts = {
        "rank too large": (["check", sim_csv, "--rank", "5"], ["dial-ada fit (rank 5) cannot exist", "rank r = 5"]),
        "disconnected human labels": (["check", variant(sim_csv, tmp_path, _disconnected_humans), "--method", "human"],
                                      ["human fit (rank 1) cannot exist on this design: human: human-mle:",
                                       "compared only among themselves"]),
        "two ranks too large": (["check", sim_csv, "--rank", "4,5"], ["(rank 4) cannot exist", "(rank 5) cannot exist"]),
    }[case]
    code, out, err = run(capsys, *argv)
    assert code == EXIT_IDENT and len(err.strip().splitlines()) == 1, err
    assert err.startswith("pydial: the ") and all(t in err for t in texts), err
    assert "condition" in out  # the design table
