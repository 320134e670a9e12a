"""The Python data builders write exactly the data each shipped Stan program declares.

The data block of every program is read from its text after ``#include`` expansion
(:func:`pydial.stan.programs.data_names`), so the test needs no Stan: no declared
name may be missing from a builder's dictionary and no entry may be extra.  The
schema names follow the Python vocabulary (``order``, ``ties``, ``rank``,
``prior_<block>_sd``), and the tie-parameter count and the draw count differ.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pydial
from pydial.model.chart import Chart
from pydial.model.families import DAVIDSON, RAO_KUPPER
from pydial.stan.programs import PROGRAMS, data_names, example_program, program_code, program_dir, program_path
from pydial.stan.schema import (
    dial_calibrate_data,
    dial_data,
    dial_sample_data,
    human_cell_table,
    judges_data,
    llm_cell_table,
    pooled_cell_table,
    standata,
)


def declared(program: str) -> list[str]:
    """Names declared in the data block of ``program`` (a shipped name or a path), in order."""
    return list(data_names(program))


@pytest.fixture(scope="module")
def data():
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=400, n_human=80, tie_rate=0.2, ties="davidson", seed=5)
    return sim.comparisons


def test_data_names_reads_declarations(tmp_path):
    """The parser skips comments, transformed data and bracketed sizes, and expands includes."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "part.stan").write_text("  vector[N ? 1 : 0] y;  // y; not z\n")
    prog = tmp_path / "p.stan"
    prog.write_text("functions {\n}\ndata {\n  int<lower=0> N;  // n\n  array[N, 3] int<lower=0> x; /* c; d */\n"
                    "#include part.stan\n}\ntransformed data {\n  int q = 1;\n}\n")
    assert declared(str(prog)) == ["N", "x", "y"]


def builders(data):
    """(program, label, data dictionary) for every builder and the cases that change the dictionary."""
    N, K = data.N, data.K
    L, H = llm_cell_table(data, DAVIDSON), human_cell_table(data, DAVIDSON)
    ch = Chart(N, K, 1, "W", True)
    theta = np.zeros(ch.dim)
    yield "dial", "standata", standata(data, "dial", ties="davidson")
    yield "dial", "binary", dial_data(data, Chart(N, K, 0, "mu", False), w_llm=1.0)
    yield "dial", "fix_llm", dial_data(data, ch, w_llm=0.0, w_human=1.0, fix_llm=theta, family=RAO_KUPPER,
                                       boundary_nu=True)
    yield "dial", "firth", dial_data(data, Chart(N, 1, 0, None, True), w_llm=1.0,
                                     llm=pooled_cell_table(data), firth=1)
    yield "dial_sample", "standata", standata(data, "dial_sample", ties="davidson")
    yield "dial_sample", "win_prob", dial_sample_data(data, rank=1, calibration="W", win_prob=True)[0]
    yield "judges", "standata", standata(data, "judges", ties="rao-kupper")
    yield "judges", "human", judges_data(L.select(L.judge < 0), H, N=N, K=0, order=False, family=DAVIDSON,
                                         flat=True)
    yield "judges", "firth", judges_data(llm_cell_table(data), None, N=N, K=K, firth=True)
    yield "dial_calibrate", "binary", dial_calibrate_data(human_cell_table(data), np.ones((5, N, 2)))
    yield "dial_calibrate", "ties", dial_calibrate_data(H, np.ones((5, N, 1)), family=DAVIDSON)


def test_every_shipped_program_is_covered(data):
    assert {p for p, _, _ in builders(data)} == set(PROGRAMS)


@pytest.mark.parametrize("case", range(11))
def test_builders_write_exactly_the_declared_data(data, case):
    program, label, d = list(builders(data))[case]
    names = declared(program)
    assert len(names) == len(set(names)), f"{program}: a name is declared twice"
    missing, extra = sorted(set(names) - set(d)), sorted(set(d) - set(names))
    assert not missing and not extra, f"{program} ({label}): missing {missing}, extra {extra}"


def test_extension_reads_the_shipped_data_plus_its_own(data):
    """The installed tie_gap.stan: judges.stan's data and prior_kappa_sd, what pydial.stan.examples.tie_gap passes."""
    names = declared(str(example_program("tie_gap")))
    d = standata(data, "judges", ties="davidson", extra={"prior_kappa_sd": 1.0})
    assert set(names) == set(d) and set(names) - set(declared("judges")) == {"prior_kappa_sd"}


def test_one_vocabulary_across_programs():
    """Shared names mean one thing: the schema, prior_<block>_sd, firth's range, two distinct counts."""
    schema = declared("judges")[:18]
    assert schema[:4] == ["N", "K", "order", "ties"]
    for program in PROGRAMS:
        names = declared(program)
        assert names[:18] == schema, program
        assert not {"use_order", "tie_model", "r", "T"} & set(names), program
        assert all(re.fullmatch(r"prior_\w+_(sd|mean)", n) for n in names if n.startswith("prior")), program
        code = program_code(program)
        if "firth;" in code:
            assert re.search(r"int<lower=0, upper=2> firth;", code), program
    # the tie-parameter count (transformed data) and the draw count (dial_calibrate's data) differ
    assert "n_draws" in declared("dial_calibrate") and "n_nu" in program_code("dial_calibrate")
    assert "n_draws" not in program_code("dial_sample")


@pytest.mark.parametrize("shared", [False, True])
def test_standata_covariates_are_the_same_for_every_program(shared):
    """On data with covariates every program gets n_cov, the cells' z and the groups' rows of beta."""
    effects = "shared" if shared else "judge"
    sim = pydial.simulate(N=6, K=3, n_llm=300, n_human=60, covariates=["length", "lists"], beta=0.4, seed=2)
    data = sim.comparisons
    L, H = llm_cell_table(data), human_cell_table(data)
    out = {p: standata(data, p, covariate_effects=effects) for p in ("dial", "dial_sample", "judges")}
    for program, d in out.items():
        assert d["n_cov"] == 2, program
        np.testing.assert_array_equal(d["cell_z"], L.z, err_msg=program)
        np.testing.assert_array_equal(d["human_z"], H.z, err_msg=program)
    rows = np.array([1, 1, 1, 2]) if shared else np.array([1, 2, 3, 4])
    for program in ("dial", "dial_sample"):  # judges.stan has each judge's own effects
        np.testing.assert_array_equal(out[program]["beta_row"], rows, err_msg=program)
        assert out[program]["n_beta"] == rows.max()
    np.testing.assert_array_equal(out["judges"]["beta_row"], [1, 2, 3, 4])
    np.testing.assert_array_equal(out["dial"]["beta_fixed"], out["dial_sample"]["beta_fixed"])


def test_builders_take_the_family_object(data):
    """The cell helpers and data builders take the outcome family (its code is the datum ties), not a string or a bool."""
    from pydial.model.families import BINARY, family_of

    for name in ("davidson", "rao-kupper"):
        fam = family_of(name)
        d = judges_data(llm_cell_table(data, fam), human_cell_table(data, fam), N=data.N, K=data.K, family=fam)
        assert d["ties"] == fam.code and d["cell_counts"].shape[1] == 3
        ref = standata(data, "judges", ties=name)  # the spec's ties= resolved at the API edge
        assert ref.keys() == d.keys() and all(np.array_equal(ref[k], d[k]) for k in d)
    assert llm_cell_table(data, BINARY).tie_counts.sum() == 0
    with pytest.raises(pydial.ArgumentTypeError, match="family must be a pydial.model.families.Family"):
        judges_data(llm_cell_table(data), None, N=data.N, K=data.K, family="davidson")
    with pytest.raises(TypeError):
        llm_cell_table(data, ties=True)


def test_standata_takes_the_spec_or_its_keywords(data):
    spec = pydial.ModelSpec(method="dial-nopos", rank=1, calibration="W", ties="davidson", lambda_=0.5)
    a = standata(data, "dial", spec)
    b = standata(data, "dial", method="dial-nopos", rank=1, calibration="W", ties="davidson", lambda_=0.5)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert (a["order"], a["calibration"], a["ties"]) == (0, 2, 1)
    np.testing.assert_allclose(a["cell_w"], 0.5 * data.n_human / data.n_llm)
    with pytest.raises(pydial.ArgumentError, match="not both"):
        standata(data, "dial", spec, rank=1)
    with pytest.raises(pydial.ArgumentError, match="one weight"):
        standata(data, "dial", lambda_=[0.5, 2.0])
    with pytest.raises(TypeError):
        standata(data, "dial", lam=0.5)


def test_program_code_of_shipped_example_and_user_programs(tmp_path):
    """program_code resolves a shipped name, an example name or a path; the includes are expanded."""
    from pathlib import Path

    from pydial.stan import program_code as public

    assert public is program_code
    tie_gap = program_code("tie_gap")
    assert tie_gap == program_code(example_program("tie_gap")) == program_code(str(example_program("tie_gap")))
    assert not [ln for ln in tie_gap.splitlines() if ln.startswith("#include")] and "kappa" in tie_gap
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "mine.stan").write_text("real twice(real x) { return 2 * x; }\n")
    prog = tmp_path / "user.stan"
    prog.write_text("functions {\n#include mine.stan\n#include paired_likelihoods.stan\n}\n")
    code = program_code(prog)
    assert "real twice(real x)" in code and "real paired_target(" in code
    assert code.splitlines()[1] == "// ---- begin #include mine.stan"
    with pytest.raises(pydial.ArgumentError, match="unknown Stan program"):
        program_code("nope")
    with pytest.raises(pydial.ArgumentError, match="unknown Stan program"):
        program_code(Path(tmp_path / "absent.stan"))


def _schema_block(code: str) -> str:
    """The declarations of the cells every program reads: the data block up to calc_log_lik."""
    start = code.index("  // ---- the cells, as every pydial program reads them")
    return code[start:code.index("calc_log_lik;", start)]


def test_every_program_declares_the_same_cells():
    """The data schema is written out in each program, word for word the same."""
    blocks = {p: _schema_block(program_path(p).read_text()) for p in [*PROGRAMS, "tie_gap"]}
    assert len(set(blocks.values())) == 1, sorted(blocks)


def test_includes_are_functions_only_and_compile_alone(tmp_path):
    """Each file of stan/include is a functions-only fragment: stanc compiles it inside `functions { }`
    with nothing else, and every program includes files only in its functions block."""
    import subprocess

    cmdstanpy = pytest.importorskip("cmdstanpy")
    try:
        stanc = Path(cmdstanpy.cmdstan_path()) / "bin" / "stanc"
    except ValueError:
        pytest.skip("CmdStan is not installed")
    for f in sorted((program_dir() / "include").glob("*.stan")):
        prog = tmp_path / f"only_{f.name}"
        prog.write_text(f"functions {{\n{f.read_text()}\n}}\nparameters {{\n  real x;\n}}\nmodel {{\n  x ~ std_normal();\n}}\n")
        out = subprocess.run([str(stanc), prog.name, f"--o={prog.stem}.hpp"], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, f"{f.name}: {out.stderr}"
    for p in [*PROGRAMS, "tie_gap"]:
        text = program_path(p).read_text()
        functions = text[text.index("functions {"):text.index("\ndata {")]
        assert text.count("#include") == functions.count("#include") > 0, p


def test_dial_parameters_map_the_chart_coordinates_by_name(data):
    """The chart coordinates (theta, log nu) to dial.stan's parameters and its unconstrained vector, and back."""
    from pydial.stan.parameters import dial_coordinates, dial_from_unconstrained, dial_parameters, dial_unconstrained

    ch = Chart(data.N, data.K, 1, "W", True)
    d = dial_data(data, ch, w_llm=1.0, w_human=1.0, family=DAVIDSON)
    x = np.arange(ch.dim + data.K + 1, dtype=float)
    parts = dial_parameters(d, x)
    assert {k: v.shape for k, v in parts.items()} == {"A_free": (2, 2), "B_free": (5, 2), "c": (2,), "b": (3,),
                                                      "beta_free": (0,), "log_nu": (4,)}
    np.testing.assert_array_equal(parts["A_free"].ravel(), x[ch.slices["A"]])  # the chart's rows of A, row-major
    u = dial_unconstrained(d, x)
    np.testing.assert_array_equal(u[:4], [0, 2, 1, 3])  # Stan's layout: column-major
    np.testing.assert_array_equal(dial_from_unconstrained(d, u), x)
    np.testing.assert_array_equal(dial_coordinates(d, parts), x)
    fixed = dial_data(data, ch, w_llm=0.0, w_human=1.0, fix_llm=x[: ch.dim])
    assert fixed["A_fix"].shape == (2, 2) and fixed["B_fix"].shape == (5, 2)
    np.testing.assert_array_equal(fixed["B_fix"], parts["B_free"])
    np.testing.assert_array_equal(dial_unconstrained(fixed, [1.0, 2.0]), [1.0, 2.0])  # (c) alone
    with pytest.raises(pydial.ArgumentError, match="3 entries in the chart coordinates, but the parameters have 2"):
        dial_parameters(fixed, np.zeros(3))
