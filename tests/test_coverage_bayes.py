"""The frequentist-vs-Bayesian coverage study (analyses/coverage/bayes.py).

The summary arithmetic is checked on a hand-built table with known coverage, Monte
Carlo standard error and width.  One replication end to end (fits, bootstrap, CmdStan
posteriors and Laplace approximations at tiny settings) is ``slow`` and ``stan``, and runs
only when asked for (``python -m pytest -m slow tests/test_coverage_bayes.py``), so that
the default test run stays fast.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyses.coverage import bayes


def _row(dgp, rep, method, estimand, interval, cov, width, flag="", error=""):
    return {"dgp": dgp, "rep": rep, "method": method, "estimand": estimand, "interval": interval,
            "coverage": cov, "width": width, "flag": flag, "error": error}


def test_interval_helpers():
    """Coverage share, the contrast rows, Wald contrast intervals and equal-tailed quantile intervals."""
    assert bayes.coverage([0, 0, 0, 0], [1, 1, 1, 1], [0.5, 1.0, 1.5, -0.1]) == 0.5
    D = bayes.contrast_matrix(3)
    np.testing.assert_array_equal(D, [[1, -1, 0], [1, 0, -1], [0, 1, -1]])
    lo, hi = bayes.wald_contrasts(np.array([1.0, 0.0, -1.0]), np.eye(3), level=0.95)
    z = 1.959963984540054
    np.testing.assert_allclose(hi - lo, 2 * z * np.sqrt(2) * np.ones(3))
    np.testing.assert_allclose((lo + hi) / 2, [1.0, 2.0, 1.0])
    x = np.arange(1001, dtype=float)[:, None] * np.ones((1, 2))
    lo, hi = bayes.quantile_intervals(x, level=0.95)
    np.testing.assert_allclose(lo, 25.0)
    np.testing.assert_allclose(hi, 975.0)


def test_summary_arithmetic_on_a_hand_built_table():
    """Coverage, MC SE, width, failures and the flagged share of a table with known answers, in the DGP order."""
    rows = [
        # three replications of one cell: coverage 1, 0.5, 0.75; widths 1, 2, 3
        _row("well-specified", 0, "human", "contrasts", "wald", 1.0, 1.0),
        _row("well-specified", 1, "human", "contrasts", "wald", 0.5, 2.0),
        _row("well-specified", 2, "human", "contrasts", "wald", 0.75, 3.0),
        # a posterior cell: one failed replication, one flagged of the two counted
        _row("well-specified", 0, "human", "contrasts", "posterior", 1.0, 4.0, flag="R-hat > 1.01"),
        _row("well-specified", 1, "human", "contrasts", "posterior", 0.0, 2.0),
        _row("well-specified", 2, "human", "contrasts", "posterior", np.nan, np.nan, error="ConvergenceError: x"),
        # another DGP, listed after the first whatever the order of the rows
        _row("misaligned", 0, "dial-ada", "b", "laplace", 0.25, 0.5),
    ]
    df = pd.DataFrame(rows[-1:] + rows[:-1])
    t = bayes.summarize(df)
    assert list(t["dgp"]) == ["well-specified", "well-specified", "misaligned"]
    assert list(t["interval"]) == ["wald", "posterior", "laplace"]
    w = t.iloc[0]
    assert (w["reps"], w["failed"]) == (3, 0)
    assert w["coverage"] == pytest.approx(0.75)
    # sd of (1, 0.5, 0.75) with ddof = 1 is 0.25; MC SE = 0.25 / sqrt(3)
    assert w["mc_se"] == pytest.approx(0.25 / np.sqrt(3))
    assert w["width"] == pytest.approx(2.0)
    assert w["flagged"] == 0.0
    p = t.iloc[1]
    assert (p["reps"], p["failed"]) == (2, 1)
    assert p["coverage"] == pytest.approx(0.5)
    assert p["mc_se"] == pytest.approx(np.std([1.0, 0.0], ddof=1) / np.sqrt(2))
    assert p["width"] == pytest.approx(3.0)
    assert p["flagged"] == pytest.approx(0.5)
    m = t.iloc[2]
    assert (m["reps"], m["coverage"], m["width"]) == (1, 0.25, 0.5)
    assert np.isnan(m["mc_se"])  # one replication has no standard error


def test_the_run_resumes(tmp_path, monkeypatch):
    """A second run with more replications runs only the missing ones and appends their rows."""
    calls = []

    def fake(dgp, rep, seed, settings):
        calls.append((dgp, rep))
        return [dict(_row(dgp, rep, "human", "scores", "wald", 1.0, 1.0), n_targets=8, multiple=np.inf,
                     status="ok", rhat_max=np.nan, divergent=np.nan, seconds=0.1, rep_seconds=0.1)]

    monkeypatch.setattr(bayes, "_worker", fake)
    bayes.run(2, 1, 1, tmp_path, dgps=("well-specified", "small-budget"))
    bayes.run(3, 1, 1, tmp_path, dgps=("well-specified", "small-budget"))
    assert calls == [("well-specified", 0), ("small-budget", 0), ("well-specified", 1), ("small-budget", 1),
                     ("well-specified", 2), ("small-budget", 2)]
    df = pd.read_csv(tmp_path / bayes.CSV_NAME)
    assert len(df) == 6 and list(df.columns) == list(bayes.COLUMNS)


def test_record_effects_make_records_of_every_judge_in_both_orders():
    """The record-level DGP: each record is one pair judged by every judge in both orders, the people's
    rows are kept, and the record's effect is shared: with a huge effect a record's judgments agree."""
    sim = bayes.simulate_dgp("well-specified", 0, 3)
    K = sim.truth.S.shape[0]
    rec = bayes.with_record_effects(sim, 1.0, np.random.default_rng(0))
    f = rec.frame
    llm, hum = f[f["judge"] != "human"], f[f["judge"] == "human"]
    assert len(llm) == bayes.DESIGN["n_llm"] // (2 * K) * 2 * K and rec.config["records"] == len(llm) // (2 * K)
    g = llm.groupby("record_id")
    assert (g.size() == 2 * K).all() and (g["judge"].nunique() == K).all()
    assert (g["item_a"].nunique() == 1).all() and (g["item_b"].nunique() == 1).all()
    assert (llm.groupby(["record_id", "judge"])["first"].agg(lambda v: "".join(sorted(v))) == "ab").all()
    pd.testing.assert_frame_equal(hum.drop(columns="record_id").reset_index(drop=True),
                                  sim.frame[sim.frame["judge"] == "human"].drop(columns="record_id").reset_index(drop=True))
    assert f["record_id"].nunique() == rec.config["records"] + len(hum)  # the people's rows are records of their own

    def agreement(sd: float) -> float:
        x = bayes.with_record_effects(sim, sd, np.random.default_rng(1)).frame
        x = x[x["judge"] != "human"]
        return float(x.groupby("record_id")["winner"].nunique().eq(1).mean())

    assert agreement(0.0) < 0.2 and agreement(30.0) > 0.9
    rec.comparisons  # valid input: no duplicate rows, every record id unique to its judgments


def _slow_selected(config) -> bool:
    return "slow" in (config.getoption("markexpr", "") or "")


@pytest.mark.slow
@pytest.mark.stan
def test_one_replication_end_to_end(request, tmp_path):
    """Every method and interval of one replication, with every column and coverages in [0, 1]; the report."""
    if not _slow_selected(request.config):
        pytest.skip("one replication with CmdStan: run with -m slow")
    from pydial.stan.backend import backend_available

    if not backend_available("cmdstanpy"):
        pytest.skip("needs CmdStan")
    rows = bayes.run_replication("small-budget", 0, 7, bayes.SMOKE)
    df = pd.DataFrame(rows, columns=list(bayes.COLUMNS))
    assert set(df.columns) == set(bayes.COLUMNS) and df[["dgp", "rep", "method", "interval"]].notna().all().all()
    assert (df["error"].fillna("") == "").all(), df.loc[df["error"].fillna("") != "", ["method", "interval", "error"]]
    assert df["coverage"].between(0, 1).all()
    assert (df["width"] > 0).all()
    got = set(zip(df["method"], df["estimand"], df["interval"]))
    for m in ("human", "dial-anc", "dial-ada"):
        for e in ("scores", "contrasts"):
            for iv in ("wald", "sandwich-binomial", "sandwich-cell", "sandwich-record", "bootstrap-basic", "posterior",
                       "laplace"):
                if (m, iv) != ("dial-anc", "laplace"):
                    assert (m, e, iv) in got, (m, e, iv)
    assert ("dial-ada", "scores", "posterior-ordinary") in got
    for m in ("judges", "dial-anc"):
        for iv in ("wald", "sandwich-cell", "bootstrap-basic", "posterior"):
            assert (m, "b", iv) in got, (m, iv)
    n = {"scores": 8, "contrasts": 28, "b": 4}
    assert (df["n_targets"] == df["estimand"].map(n)).all()
    df.to_csv(tmp_path / bayes.CSV_NAME, index=False)
    path = bayes.report(tmp_path, bayes.SMOKE)
    assert path.exists() and (tmp_path / "bayes_coverage.png").exists()
