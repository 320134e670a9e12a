"""End-to-end runs of the pydial command line: outputs, exit codes, one-line messages."""

import json

import numpy as np
import pandas as pd
import pytest

from pydial.cli import EXIT_DATA, EXIT_IDENT, main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_synthetic_writes_outputs(tmp_path, capsys):
    code, out, err = run(capsys, "fit", "synthetic", "--method", "dial-ada", "--rank", "1", "--out", str(tmp_path))
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert list(scores.columns) == ["item", "score", "se", "ci_low", "ci_high"]
    assert len(scores) == 10 and scores["score"].abs().sum() > 0
    assert abs(scores["score"].sum()) < 1e-8  # centered
    pe = pd.read_csv(tmp_path / "position_effects.csv")
    assert {"judge", "b", "se", "ci_low", "ci_high", "p_value", "first_rate"} <= set(pe.columns)
    g = pd.read_csv(tmp_path / "gacv.csv")
    assert g["admissible"].any() and {"lambda", "multiple", "gacv", "l_H", "trace", "reason"} <= set(g.columns)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["method"] == "dial-ada" and summary["converged"] is True
    assert set(summary["scores"]) == set(scores["item"])
    for png in ("scores.png", "position_effects.png", "gacv.png"):
        assert (tmp_path / png).stat().st_size > 1000
    assert "GACV path" in (tmp_path / "report.md").read_text()


def test_fit_arena_html(tmp_path, capsys):
    code, out, err = run(capsys, "fit", "arena", "--method", "dial-anc", "--out", str(tmp_path), "--format", "html")
    assert code == 0, err
    assert "gpt-4" in pd.read_csv(tmp_path / "scores.csv")["item"].tolist()
    assert (tmp_path / "report.html").read_text().startswith("<html>")


def test_check_ok_and_simulate_and_convert(tmp_path, capsys):
    code, out, _ = run(capsys, "check", "synthetic", "--method", "dial-anc")
    assert code == 0 and "ident-LLM" in out and "design ok" in out
    sim = tmp_path / "sim.csv"
    code, out, _ = run(capsys, "simulate", str(sim), "-N", "6", "-K", "3", "--n-llm", "600", "--n-human", "90", "--seed", "3")
    assert code == 0
    df = pd.read_csv(sim)
    assert len(df) == 690 and set(df.columns) == {"record_id", "judge", "item_a", "item_b", "first", "winner"}
    conv = tmp_path / "conv.csv"
    code, out, _ = run(capsys, "convert", "table", str(sim), "--out", str(conv))
    assert code == 0 and "read 690" in out and len(pd.read_csv(conv)) == 690


def _write(tmp_path, df):
    p = tmp_path / "bad.csv"
    df.to_csv(p, index=False)
    return str(p)


BASE = pd.DataFrame({"record_id": [1, 2, 3, 4], "judge": ["g", "g", "human", "human"], "item_a": ["x", "y", "x", "y"],
                     "item_b": ["y", "z", "y", "z"], "first": ["a", "b", "a", "a"], "winner": ["a", "b", "a", "b"]})


def test_missing_column_exit_2(tmp_path, capsys):
    code, out, err = run(capsys, "fit", _write(tmp_path, BASE.drop(columns="first")))
    assert code == EXIT_DATA
    assert err.startswith("pydial: bad input: missing column(s) 'first'") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_winner_exit_2(tmp_path, capsys):
    bad = BASE.assign(winner=["a", "draw", "a", "b"])
    code, out, err = run(capsys, "check", _write(tmp_path, bad))
    assert code == EXIT_DATA and "unknown winner value(s) ['draw']" in err and "rows [1]" in err


def test_non_identifiable_judge_exit_3(tmp_path, capsys):
    # judge g sees a single pair in a single order: never identified
    df = pd.DataFrame({"record_id": range(6), "judge": ["g"] * 3 + ["human"] * 3, "item_a": ["x"] * 3 + ["x", "y", "x"],
                       "item_b": ["y"] * 3 + ["y", "z", "z"], "first": ["a"] * 6, "winner": ["a", "b", "a", "a", "b", "b"]})
    path = _write(tmp_path, df)
    code, out, err = run(capsys, "check", path, "--method", "judges")
    assert code == EXIT_IDENT and "g: ident-LLM" in err
    code, out, err = run(capsys, "fit", path, "--method", "dial-anc")
    assert code == EXIT_IDENT and err.startswith("pydial: not identifiable:") and "'g'" in err


def test_help_is_readable(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "position effect" in out and "GACV" in out and "winner" in out


@pytest.mark.stan
def test_compare_runs_end_to_end(tmp_path, capsys, stan_backend_name):
    import arviz as az

    from pydial.stan.idata import group_names

    code, out, err = run(capsys, "compare", "synthetic", "--chains", "2", "--draws", "300", "--warmup", "300",
                         "--level", "0.9", "--allow-warnings", "--out", str(tmp_path))
    assert code == 0, err
    tab = pd.read_csv(tmp_path / "compare_intervals.csv")
    assert {"estimate", "se", "post_mean", "cred_low", "cred_high", "width_ratio"} <= set(tab.columns)
    assert len(tab) == 10 + 4  # 10 item scores and 4 judge position effects
    assert (tab["level"] == 0.9).all()
    # the posterior of the same estimator (dial-ada at its GACV lambda): centred on the MLE
    assert (abs(tab["post_mean"] - tab["estimate"]) / tab["se"]).median() < 0.5
    assert "b from the LLM-only stage" in out
    assert (tmp_path / "compare_intervals.png").stat().st_size > 5000
    idata = az.from_netcdf(tmp_path / "posterior.nc")
    assert json.loads(idata.attrs["estimand"])["method"] == "dial-ada"
    assert {"posterior", "log_likelihood", "posterior_predictive", "observed_data"} <= set(group_names(idata))


@pytest.mark.stan
def test_compare_sampler_problems_exit_5(tmp_path, capsys, stan_backend_name):
    from pydial.cli import EXIT_SAMPLER

    args = ("compare", "synthetic", "--method", "human", "--chains", "2", "--draws", "15", "--warmup", "15")
    code, out, err = run(capsys, *args, "--out", str(tmp_path))
    assert code == EXIT_SAMPLER == 5
    assert "pydial: sampler warning:" in err and "--allow-warnings" in err
    assert (tmp_path / "posterior.nc").is_file()  # written for inspection
    code, out, err = run(capsys, *args, "--allow-warnings")
    assert code == 0


@pytest.mark.stan
def test_fit_engine_stan(tmp_path, capsys, stan_backend_name):
    code, out, err = run(capsys, "fit", "synthetic", "--method", "dial-anc", "--engine", "stan")
    assert code == 0, err
    code2, out2, _ = run(capsys, "fit", "synthetic", "--method", "dial-anc")
    assert code2 == 0
    # same model, two optimizers: the same summary line for the first item score (4 decimals)
    first = [ln for ln in out.splitlines() if ln.startswith("item00")][:1]
    assert first and first == [ln for ln in out2.splitlines() if ln.startswith("item00")][:1]


def test_tie_firth_fit_from_the_command_line(capsys):
    code, out, err = run(capsys, "fit", "synthetic", "--method", "dial-anc", "--ties", "davidson", "--penalty", "firth")
    assert code == 0, err
    assert "Traceback" not in err and "item00" in out


def test_fit_penalty_firth(capsys):
    code, out, err = run(capsys, "fit", "synthetic", "--method", "human", "--penalty", "firth")
    assert code == 0, err
    import pydial

    ref = pydial.fit(pydial.datasets.synthetic(), "human", penalty="firth").scores
    first = [ln for ln in out.splitlines() if ln.startswith(ref.index[0])][0].split()
    assert abs(float(first[1]) - ref["score"].iloc[0]) < 1e-3


def test_fit_with_ties_writes_tie_parameters(capsys, tmp_path):
    code, out, err = run(capsys, "fit", "arena", "--method", "dial-anc", "--ties", "davidson", "--out", str(tmp_path / "o"))
    assert code == 0, err
    t = pd.read_csv(tmp_path / "o" / "tie_parameters.csv")
    assert list(t.columns) == ["judge", "nu", "se", "ci_low", "ci_high"]
    assert (t["nu"] > 0).all() and "human" in set(t["judge"])


def test_plan_refuses_a_failed_pilot_and_fractional_budgets(capsys, monkeypatch):
    import dataclasses

    import pydial.api as est

    real = est.fit
    monkeypatch.setattr(est, "fit", lambda *a, **k: dataclasses.replace(real(*a, **k), status="not converged",
                                                                       problems=("test: not converged",)))
    code, out, err = run(capsys, "plan", "synthetic", "--budgets", "100,400")
    assert code == 4 and err.startswith("pydial: pilot fit failed (dial-anc): not converged")
    monkeypatch.setattr(est, "fit", real)
    with pytest.raises(SystemExit) as e:
        main(["plan", "synthetic", "--budgets", "100.5"])
    assert e.value.code == 2 and "comma-separated integers" in capsys.readouterr().err


def test_fit_cluster_correction(capsys, tmp_path):
    code, out, err = run(capsys, "fit", "synthetic", "--method", "dial-anc", "--cluster-correction", "--out", str(tmp_path))
    assert code == 0, err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["cluster_correction"] is True and "G/(G-1)" in out
    import pydial

    ref = pydial.fit(pydial.datasets.synthetic(), "dial-anc", cluster_correction=True).scores
    got = pd.read_csv(tmp_path / "scores.csv").set_index("item")
    np.testing.assert_allclose(got.loc[ref.index, "se"].to_numpy(), ref["se"].to_numpy(), rtol=1e-9)
