"""The worked extension installed with pydial (``pydial.stan.example_program("tie_gap")``) runs and is what it says.

It is found by name from any working directory, its script runs as
``python -m pydial.stan.examples.tie_gap``, and its parameter ``kappa`` (one per judge
and one for the people) comes back labelled by their names.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pydial
from pydial.stan import example_program, example_programs, program_path

PACKAGE = Path(pydial.__file__).resolve().parent


def test_example_programs_are_installed_with_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert list(example_programs()) == ["tie_gap"]
    path = example_program("tie_gap")
    assert path.is_absolute() and path.is_file() and path.suffix == ".stan"
    assert path.parent == PACKAGE / "stan" / "examples"  # package data of pydial.stan.examples
    assert path.parent.joinpath("tie_gap.py").is_file()
    with pytest.raises(pydial.ArgumentError, match="tie_gap"):
        example_program("no_such_example")


def test_extension_is_judges_stan_plus_marked_lines():
    """tie_gap.stan is a copy of judges.stan plus lines ending in `// + tie gap`: without them it is judges.stan."""
    shipped = program_path("judges").read_text().splitlines()
    ext = program_path("tie_gap").read_text().splitlines()
    added = [line for line in ext if line.endswith("// + tie gap")]
    assert [line for line in ext if not line.endswith("// + tie gap")] == shipped
    # what it adds: its datum, its parameter (one per group) and prior, and the offset of log nu in both places
    assert sum("log_nu_cell -= kappa[all_judge] .* square(eta);" in line for line in added) == 2
    assert sum("vector[K + 1] kappa;" in line for line in added) == 1
    assert sum("real<lower=0> prior_kappa_sd;" in line for line in added) == 1
    assert sum("target += normal_lpdf(kappa | 0, prior_kappa_sd);" in line for line in added) == 1
    diff = [line for line in difflib.unified_diff(shipped, ext, lineterm="", n=0) if line[:1] in "+-"]
    assert [line[1:] for line in diff if not line.startswith(("+++", "---"))] == added


def test_script_runs_as_a_module_from_any_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-m", "pydial.stan.examples.tie_gap", "--help"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "python -m pydial.stan.examples.tie_gap" in out.stdout and "--records" in out.stdout
    assert os.listdir(tmp_path) == []


@pytest.mark.stan
@pytest.mark.usefixtures("stan_backend_name")
def test_extension_runs_on_arena_subset_and_compares_by_loo(tmp_path, monkeypatch):
    """From a directory outside the repository: sampled, compared by LOO, ``kappa`` labelled, nothing written there."""
    from pydial.stan.examples.tie_gap import run

    monkeypatch.chdir(tmp_path)
    out = run(records=1500, chains=2, draws=150, warmup=150, seed=3)
    data, shipped, ext, table = out["data"], out["shipped"], out["extended"], out["compare"]
    assert set(table.index) == {"davidson", "davidson + tie gap"}
    assert np.all(np.isfinite(table["elpd_loo"]))
    assert "kappa" in ext.posterior and "kappa" not in shipped.posterior
    # same cells, same observed data: the two log_lik arrays are comparable
    assert shipped.log_likelihood["log_lik"].sizes["cell"] == ext.log_likelihood["log_lik"].sizes["cell"]
    assert (shipped.observed_data["ties"] == ext.observed_data["ties"]).all()
    assert ext.attrs["program"] == str(example_program("tie_gap"))
    assert ext.posterior["nu"].dims[-1] == "tie_judge"
    # kappa (vector[K + 1]): the judges by name, then the people, instead of kappa_dim_0 = 0..K
    groups = list(data.judges) + [data.human_judge]
    assert ext.posterior["kappa"].dims == ("chain", "draw", "judge_human")
    assert list(ext.posterior["kappa"]["judge_human"].values) == groups == [*data.judges, "human"]
    # the labels name the right entries: the program's log_nu (labelled by its size K + 1) against the shipped nu
    log_nu = ext.posterior["log_nu"]
    assert log_nu.dims[-1] == "judge_human"
    for g in groups:
        np.testing.assert_allclose(np.exp(log_nu.sel(judge_human=g).values),
                                   ext.posterior["nu"].sel(tie_judge=g).values, rtol=1e-12)
    # s_raw (K x (N - 1)): judges labelled, the N - 1 basis coordinates not
    assert ext.posterior["s_raw"].dims == ("chain", "draw", "judge", "s_raw_dim_1")
    assert list(ext.posterior["s_raw"]["judge"].values) == list(data.judges)
    assert os.listdir(tmp_path) == []
