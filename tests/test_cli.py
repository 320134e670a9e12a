"""End-to-end runs of the pydial command line: outputs, exit codes, one-line messages.

The tests marked ``stan`` compile Stan programs (once per backend, cached on disk) and
sample the small data set ``tiny_csv``; ``pytest -m "not stan"`` runs the others in seconds.
"""

import json

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.cli import EXIT_DATA, EXIT_IDENT, main

RENAMED = {"record_id": "question_id", "judge": "annotator", "item_a": "model_a", "item_b": "model_b",
           "first": "shown_first", "winner": "verdict"}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    """Four items, two LLM judges, 600 LLM and 300 human judgments: every estimator fits, quick to sample.

    The people prefer other than the judges' consensus (``--target misaligned``), so GACV picks
    a finite LLM weight (0.63) and ``dial-ada`` is not ``dial-anc``.
    """
    p = tmp_path_factory.mktemp("tiny") / "tiny.csv"
    argv = ["simulate", str(p), "-N", "4", "-K", "2", "--n-llm", "600", "--n-human", "300", "--target", "misaligned",
            "--seed", "2"]
    assert main(argv) == 0
    return p


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"pydial {pydial.__version__}\n"


def test_fit_synthetic_writes_outputs(tmp_path, capsys):
    code, out, err = run(capsys, "fit", "synthetic", "--rank", "1", "--out", str(tmp_path))  # dial-ada by default
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
def test_compare_runs_end_to_end(tmp_path, capsys, stan_backend_name, tiny_csv):
    import arviz as az

    from pydial.stan.idata import group_names

    code, out, err = run(capsys, "compare", tiny_csv, "--chains", "2", "--draws", "300", "--warmup", "300",
                         "--level", "0.9", "--allow-warnings", "--out", str(tmp_path))  # dial-ada by default
    assert code == 0, err
    tab = pd.read_csv(tmp_path / "compare_intervals.csv")
    assert {"estimate", "se", "post_mean", "cred_low", "cred_high", "width_ratio"} <= set(tab.columns)
    assert len(tab) == 4 + 2  # 4 item scores and 2 judge position effects
    assert (tab["level"] == 0.9).all()
    # the posterior of the same estimator (dial-ada at its GACV lambda): centred on the MLE
    assert (abs(tab["post_mean"] - tab["estimate"]) / tab["se"]).median() < 0.5
    assert "b from the LLM-only stage" in out
    assert (tmp_path / "compare_intervals.png").stat().st_size > 5000
    idata = az.from_netcdf(tmp_path / "posterior.nc")
    assert json.loads(idata.attrs["estimand"])["spec"]["method"] == "dial-ada"
    assert {"posterior", "log_likelihood", "posterior_predictive", "observed_data"} <= set(group_names(idata))


@pytest.mark.stan
def test_compare_seed_and_dial_nopos(tmp_path, capsys, stan_backend_name, tiny_csv):
    """Every posterior method is on compare; one seed gives the same draws, another seed other draws."""
    import arviz as az

    def draws(seed, name):
        code, _, err = run(capsys, "compare", tiny_csv, "--method", "dial-nopos", "--chains", "1", "--draws", "100",
                           "--warmup", "100", "--allow-warnings", "--seed", seed, "--out", tmp_path / name)
        assert code == 0, err
        return pd.read_csv(tmp_path / name / "compare_intervals.csv")

    first, again, other = draws(3, "a"), draws(3, "b"), draws(4, "c")
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["post_mean"], other["post_mean"])
    np.testing.assert_array_equal(first["estimate"], other["estimate"])  # the fit is not random
    assert json.loads(az.from_netcdf(tmp_path / "a" / "posterior.nc").attrs["estimand"])["spec"]["method"] == "dial-nopos"


@pytest.mark.stan
def test_compare_sampler_problems_exit_5(tmp_path, capsys, stan_backend_name, tiny_csv):
    from pydial.cli import EXIT_SAMPLER

    args = ("compare", tiny_csv, "--method", "human", "--chains", "2", "--draws", "15", "--warmup", "15")
    code, out, err = run(capsys, *args, "--out", str(tmp_path))
    assert code == EXIT_SAMPLER == 5
    *before, last = err.strip().splitlines()  # the refusal is one line: the problems and what to change
    assert last.startswith("pydial: the sampler reported problems:") and "--allow-warnings" in last
    assert all(line.startswith("pydial: compiling") for line in before)  # only a first compile's notice before it
    assert (tmp_path / "posterior.nc").is_file()  # written for inspection
    code, out, err = run(capsys, *args, "--allow-warnings")
    assert code == 0 and "pydial: sampler warning:" in err  # accepted, still reported


@pytest.mark.stan
def test_fit_engine_stan(tmp_path, capsys, stan_backend_name, tiny_csv):
    code, out, err = run(capsys, "fit", tiny_csv, "--method", "dial-anc", "--engine", "stan")
    assert code == 0, err
    code2, out2, _ = run(capsys, "fit", tiny_csv, "--method", "dial-anc")
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


# ------------------------------------------------------------------ column names
def _renamed(tmp_path, source):
    p = tmp_path / "renamed.csv"
    pd.read_csv(source, dtype=str, keep_default_na=False).rename(columns=RENAMED).to_csv(p, index=False)
    return p


def test_renamed_columns_fit_like_python(tiny_csv, tmp_path, capsys):
    """An Arena-style table (model_a, model_b, ...) mapped on the command line fits like the standard one in Python."""
    p = _renamed(tmp_path, tiny_csv)
    code, _, err = run(capsys, "fit", p, "--columns", "judge=annotator,item_a=model_a,item_b=model_b",
                       "--record-col", "question_id", "--first-col", "shown_first", "--winner-col", "verdict",
                       "--out", tmp_path / "out")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "out" / "scores.csv", dtype={"item": str}).set_index("item")
    ref = pydial.fit(pydial.Comparisons.from_csv(tiny_csv), "dial-ada").scores
    np.testing.assert_allclose(got.loc[ref.index, ["score", "se"]].to_numpy(), ref[["score", "se"]].to_numpy(),
                               rtol=1e-6, atol=1e-9)


def test_missing_columns_name_the_command_line_options(tiny_csv, tmp_path, capsys):
    p = _renamed(tmp_path, tiny_csv)
    for argv in (("check", p), ("convert", "table", p, "--out", tmp_path / "long.csv")):
        code, _, err = run(capsys, *argv)
        assert code == EXIT_DATA and len(err.strip().splitlines()) == 1
        assert "'model_a'" in err and "--item-a-col NAME" in err and "--columns judge=NAME" in err
        assert "keyword argument" not in err
    pd.read_csv(p).to_parquet(tmp_path / "renamed.parquet")
    code, _, err = run(capsys, "plan", tmp_path / "renamed.parquet")
    assert code == EXIT_DATA and "--judge-col NAME" in err and "keyword argument" not in err
    mapped = [f"--{k.replace('_', '-')}-col={v}" for k, v in RENAMED.items()]
    code, out, err = run(capsys, "check", tmp_path / "renamed.parquet", "--method", "dial-anc", *mapped)
    assert code == 0 and "design ok" in out, err
    code, out, err = run(capsys, "convert", "table", p, "--out", tmp_path / "long.csv", *mapped)
    assert code == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "long.csv"), pd.read_csv(tiny_csv))


def test_column_options_refuse_contradictions_and_unknown_fields(tiny_csv, capsys):
    code, _, err = run(capsys, "fit", tiny_csv, "--columns", "judge=annotator", "--judge-col", "rater")
    assert code == EXIT_DATA and "--judge-col 'rater' contradicts --columns judge=annotator" in err
    for bad in ("jduge=annotator", "judge", "judge=a,judge=b"):
        with pytest.raises(SystemExit) as e:
            main(["fit", str(tiny_csv), "--columns", bad])
        assert e.value.code == 2 and "argument --columns" in capsys.readouterr().err
    code, _, err = run(capsys, "convert", "mtbench", tiny_csv, "--out", "x.csv", "--judge-col", "rater")
    assert code == EXIT_DATA and "'convert table'" in err


# ------------------------------------------------------------------ seeds, methods, defaults
def test_seed_reaches_every_random_step(tiny_csv, capsys, monkeypatch):
    import pydial.api
    import pydial.model.identifiability as ident

    seen = []

    def spy(real):
        def wrapped(*a, **k):
            seen.append(k.get("seed"))
            return real(*a, **k)
        return wrapped

    monkeypatch.setattr(pydial.api, "fit", spy(pydial.api.fit))
    monkeypatch.setattr(ident, "check_design", spy(ident.check_design))
    for command in ("fit", "check", "plan"):
        seen.clear()
        assert run(capsys, command, tiny_csv, "--seed", 11)[0] == 0
        assert seen[0] == 11, command
    with pytest.raises(SystemExit) as e:
        main(["fit", str(tiny_csv), "--seed", "-1"])
    assert e.value.code == 2 and "seed must be in [0, 2**32)" in capsys.readouterr().err


def test_same_seed_same_output_other_seed_other_output(tiny_csv, tmp_path, capsys):
    def simulate(seed, name):
        assert run(capsys, "simulate", tmp_path / name, "-N", 4, "-K", 2, "--n-llm", 60, "--n-human", 20, "--seed", seed)[0] == 0
        return (tmp_path / name).read_text()

    assert simulate(5, "a.csv") == simulate(5, "b.csv") != simulate(6, "c.csv")

    def plan(seed):  # the top-k probabilities are Monte Carlo
        code, out, err = run(capsys, "plan", tiny_csv, "--budgets", "50,100", "--seed", seed)
        assert code == 0, err
        return out

    assert plan(5) == plan(5) != plan(6)
    fits = [run(capsys, "fit", tiny_csv, "--seed", seed)[1] for seed in (5, 5, 6)]
    assert fits[0] == fits[1] == fits[2]  # the numpy fit draws nothing: the seed only picks the check's basis


def test_one_default_method_and_every_posterior_method_on_compare(tiny_csv, capsys):
    from pydial.cli import DEFAULT_METHOD
    from pydial.stan.bayes import POSTERIOR_METHODS

    assert DEFAULT_METHOD == "dial-ada"
    code, out, _ = run(capsys, "check", tiny_csv)
    assert code == 0 and "design ok for method dial-ada" in out
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "{" + ",".join(POSTERIOR_METHODS) + "}" in help_text and "dial-nopos" in POSTERIOR_METHODS
    with pytest.raises(SystemExit) as e:
        main(["compare", str(tiny_csv), "--method", "pooled"])
    assert e.value.code == 2 and "invalid choice: 'pooled'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "fit", "compare", "simulate", "convert", "plan"])
def test_subcommand_help_shows_defaults_and_choices(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0 and out.startswith(f"usage: pydial {command}")
    if command in ("check", "fit", "compare", "plan"):
        assert "--item-a-col NAME" in out and "--columns FIELD=NAME,..." in out
        assert "(default: human)" in out and "{keep,drop,raise}" in out
    if command != "convert":
        assert "--seed SEED" in out and "(default 0)" in out
