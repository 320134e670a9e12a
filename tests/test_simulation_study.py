"""The synthetic-study runner of analyses/simulation (quick configuration, a few seconds).

Checks the per-replication CSV schema, that the numbers do not depend on the number
of workers (nor on the backend), that a rerun resumes instead of recomputing, and
that the figure, summary and comparison files are written.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # analyses/ lives beside tests/, not in the installed package
    sys.path.insert(0, str(ROOT))

from analyses.simulation import cli as simulation_cli
from analyses.simulation import study
from analyses.simulation.report import write_reports

QUICK = study.resolve_configs(["quick"])
REPS = 2
TIMING = ["time_s", "cpu_s", "rep_cpu_s"]


def _frame(out: Path) -> pd.DataFrame:
    df = study.load(QUICK, out_dir=out)
    return df.sort_values(["config", "x", "rep", "method"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serial")
    rec = study.run(QUICK, reps=REPS, jobs=1, out_dir=out, progress=False)
    assert rec["tasks"] == sum(len(c.budgets) for c in QUICK) * REPS
    return out


@pytest.fixture(scope="module")
def parallel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("parallel")
    study.run(QUICK, reps=REPS, jobs=2, out_dir=out, progress=False)
    return out


def test_csv_schema(serial):
    for cfg in QUICK:
        path = study.csv_path(serial, cfg.name)
        df = pd.read_csv(path)
        assert list(df.columns) == list(study.COLUMNS)
        assert len(df) == len(cfg.budgets) * REPS * len(study.METHODS)
        assert set(df["method"]) == set(study.METHODS)
        assert (df.groupby(["x", "rep"])["method"].nunique() == len(study.METHODS)).all()
        assert set(df["x"]) == {cfg.x_of(b) for b in cfg.budgets}
        ok = df[~df["failed"]]
        assert ok["excess_risk"].between(0, 1).all()
        assert ok["kendall_tau"].between(-1, 1).all()
        cov = ok.loc[ok.method != "Oracle", "coverage"]
        assert cov.notna().all() and cov.between(0, 1).all()
        ada = ok[ok.method == "DIAL-Ada"]
        assert ada["coverage_binomial"].between(0, 1).all()
        # b_hat = 0 for order-agnostic methods: RMSE(0, b) is the same for both on a data set
        w = ok.pivot_table(index=["x", "rep"], columns="method", values="rmse_b")
        np.testing.assert_allclose(w["Pooled"], w["DIAL-noPos"])
        assert (w["DIAL-Anc"] < w["Pooled"]).all()
        assert ok.loc[ok.method.isin(["Human", "Oracle"]), "rmse_b"].isna().all()
        # the oracle is the best admissible candidate of DIAL-Ada's path, so never worse
        r = ok.pivot_table(index=["x", "rep"], columns="method", values="excess_risk")
        assert (r["Oracle"] <= r["DIAL-Ada"] + 1e-12).all()
        assert (df.loc[df.method == "Human", "multiple"] == 0).all()


def test_results_do_not_depend_on_jobs(serial, parallel):
    a, b = _frame(serial), _frame(parallel)
    pd.testing.assert_frame_equal(a.drop(columns=TIMING), b.drop(columns=TIMING), check_exact=True)


def test_seeds_are_stable_and_distinct():
    # sha256-based: the same in every process and Python version (unlike hash())
    s = study.task_seed("main-top", 100.0, 0)
    assert s == study.task_seed("main-top", 100, 0)
    assert len({s, study.task_seed("main-top", 100.0, 1), study.task_seed("main-top", 200.0, 0),
                study.task_seed("main-bottom", 100.0, 0)}) == 4
    assert 0 < s < 2**128


def test_resume_adds_nothing_then_fills_gaps(serial, tmp_path):
    out = tmp_path / "resume"
    shutil.copytree(serial, out)
    before = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    rec = study.run(QUICK, reps=REPS, jobs=1, out_dir=out, progress=False)
    assert rec["tasks"] == 0
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == before
    # drop one replication, and truncate another as an interrupted write would
    path = study.csv_path(out, "quick-top")
    df = pd.read_csv(path)
    keep = ~((df.x == 200) & (df.rep == 1))
    df[keep].to_csv(path, index=False)
    lost = df[~keep].to_csv(header=False, index=False).splitlines()
    with open(path, "a") as fh:  # an interrupted write: two rows and half a line of a replication
        fh.write("\n".join(lost[:2]) + "\n" + lost[2][: len(lost[2]) // 2])
    rec = study.run(QUICK, reps=REPS, jobs=1, out_dir=out, progress=False)
    assert rec["tasks"] == 1
    a, b = _frame(serial), _frame(out)
    pd.testing.assert_frame_equal(a.drop(columns=TIMING), b.drop(columns=TIMING), check_exact=True)
    # more replications: only the new ones run
    rec = study.run(QUICK[1:], reps=REPS + 1, jobs=1, out_dir=out, progress=False)
    assert rec["tasks"] == len(QUICK[1].budgets)


def test_reports_written(serial):
    paths = write_reports(serial)
    names = {Path(p).name for p in paths}
    assert {"simu-quick.png", "summary.csv", "comparison.md"} <= names
    assert (serial / "simu-quick.png").stat().st_size > 10_000
    summ = pd.read_csv(serial / "summary.csv")
    assert {"config", "x", "method", "metric", "n", "n_failed", "mean", "se", "median"} <= set(summ.columns)
    md = (serial / "comparison.md").read_text()
    assert "## Failures" in md and "## Selected weights" in md


def test_cli(tmp_path):
    out = tmp_path / "cli"
    assert simulation_cli.main(["--config", "quick-bottom", "--reps", "1", "--jobs", "1", "--out", str(out),
                               "--no-progress"]) == 0
    assert (out / "quick-bottom.csv").exists() and (out / "simu-quick.png").exists()
    assert (out / "comparison.md").exists()


def test_dask_backend_matches_loky(serial, tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "dask"
    cfg = study.resolve_configs(["quick-bottom"])
    rec = study.run(cfg, reps=REPS, jobs=2, backend="dask", out_dir=out, progress=False)
    assert rec["tasks"] == REPS
    a = study.load(cfg, out_dir=serial).drop(columns=TIMING)
    b = study.load(cfg, out_dir=out).drop(columns=TIMING)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
