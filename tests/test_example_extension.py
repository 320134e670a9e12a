"""The worked extension of the README (examples/tie_gap.py, examples/tie_gap.stan) runs and is what it says."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from pydial.stan import program_path

pytestmark = [pytest.mark.stan, pytest.mark.usefixtures("stan_backend_name")]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load():
    spec = importlib.util.spec_from_file_location("tie_gap", EXAMPLES / "tie_gap.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _code_lines(path: Path) -> list[str]:
    """The lines of a Stan program after its header comment (the blocks and their #include lines)."""
    lines = path.read_text().splitlines()
    return lines[next(k for k, l in enumerate(lines) if l.startswith("functions")):]


def test_extension_adds_marked_lines_to_judges_stan():
    """tie_gap.stan is judges.stan's blocks and #include lines, unchanged, plus lines marked EXTENSION."""
    shipped, ext = _code_lines(program_path("judges")), _code_lines(EXAMPLES / "tie_gap.stan")
    diff = list(difflib.unified_diff(shipped, ext, lineterm="", n=0))
    added = [l[1:] for l in diff if l.startswith("+") and not l.startswith("+++")]
    removed = [l[1:] for l in diff if l.startswith("-") and not l.startswith("---")]
    assert not removed, removed
    assert added and all("EXTENSION" in l for l in added)
    # what it adds: its datum, its parameter and prior, and the offset of log nu in both places
    assert sum("log_nu_cell -= kappa * square(eta)" in l for l in added) == 2
    assert len((EXAMPLES / "tie_gap.stan").read_text().splitlines()) < 50


def test_extension_runs_on_arena_subset_and_compares_by_loo():
    out = _load().run(records=1500, chains=2, draws=150, warmup=150, seed=3)
    shipped, ext, table = out["shipped"], out["extended"], out["compare"]
    assert set(table.index) == {"davidson", "davidson + tie gap"}
    assert np.all(np.isfinite(table["elpd_loo"]))
    assert "kappa" in ext.posterior and "kappa" not in shipped.posterior
    # same cells, same observed data: the two log_lik arrays are comparable
    assert shipped.log_likelihood["log_lik"].sizes["cell"] == ext.log_likelihood["log_lik"].sizes["cell"]
    assert (shipped.observed_data["ties"] == ext.observed_data["ties"]).all()
    assert ext.attrs["program"].endswith("tie_gap.stan")
    assert ext.posterior["nu"].dims[-1] == "tie_judge"
