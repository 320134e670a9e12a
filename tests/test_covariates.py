"""Response covariates (style control): data, the per-judge and people's models, simulation.

References are independent of the code under test: statsmodels' GLM (estimates, Fisher and
cluster-robust standard errors), hand-made tables of the canonical orientation, and the
simulation's true effects.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

import pydial
from pydial import Comparisons
from pydial.exceptions import ArgumentError, DataError


def _frame(seed: int = 0, n: int = 1500, N: int = 6) -> pd.DataFrame:
    """Judgments of two judges and people on random pairs, with a length covariate that biases judge j1."""
    rng = np.random.default_rng(seed)
    items = [f"m{i}" for i in range(N)]
    s = np.linspace(-1, 1, N)
    bias = {"j1": 0.9, "j2": 0.0, "human": 0.2}
    pos = {"j1": 0.4, "j2": -0.3, "human": 0.0}
    rows = []
    for r in range(n):
        a, c = rng.choice(N, 2, replace=False)
        la, lb = rng.gamma(4, 50), rng.gamma(4, 50)
        for k in ("j1", "j2", "human"):
            first = rng.choice(["a", "b"])
            eta = s[a] - s[c] + pos[k] * (1 if first == "a" else -1) + bias[k] * (la - lb) / 100
            u = rng.random()
            win = "tie" if u < 0.05 else ("a" if u < 0.05 + 0.95 / (1 + np.exp(-eta)) else "b")
            rows.append(dict(record_id=r, judge=k, item_a=items[a], item_b=items[c], first=first, winner=win,
                             length_a=la, length_b=lb))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return _frame()


@pytest.fixture(scope="module")
def data(frame: pd.DataFrame) -> Comparisons:
    return Comparisons.from_frame(frame, covariates=["length"])


def _statsmodels(frame: pd.DataFrame, judge: str, scale: float, order: bool = True):
    """The judge's GLM in the centered chart ``s = T beta`` with order and covariate columns, by statsmodels."""
    sub = frame[(frame.judge == judge) & frame.winner.isin(["a", "b"])]
    items = sorted(set(frame.item_a) | set(frame.item_b))
    N = len(items)
    ia = sub.item_a.map(items.index).to_numpy()
    ib = sub.item_b.map(items.index).to_numpy()
    D = np.zeros((len(sub), N))
    D[np.arange(len(sub)), ia] += 1.0
    D[np.arange(len(sub)), ib] -= 1.0
    cols = [D[:, :-1] - D[:, [-1]]]
    if order:
        cols.append(np.where(sub["first"] == "a", 1.0, -1.0)[:, None])
    cols.append(((sub.length_a - sub.length_b).to_numpy() / scale)[:, None])
    X = np.hstack(cols)
    y = (sub.winner == "a").to_numpy(float)
    model = sm.GLM(y, X, family=sm.families.Binomial())
    return model.fit(tol=1e-13), model.fit(tol=1e-13, cov_type="cluster",
                                          cov_kwds={"groups": sub.record_id.to_numpy(), "use_correction": False})


# ------------------------------------------------------------------ data
def test_scale_is_the_root_mean_square_of_the_difference(frame, data):
    assert data.covariates == ("length",)
    assert data.covariate_transform == "difference"
    d = (frame.length_a - frame.length_b).to_numpy()
    assert data.covariate_scale["length"] == pytest.approx(np.sqrt(np.mean(d ** 2)), rel=1e-12)
    swapped = frame.rename(columns={"item_a": "item_b", "item_b": "item_a", "length_a": "length_b", "length_b": "length_a"})
    swapped["first"] = swapped["first"].map({"a": "b", "b": "a"})
    swapped["winner"] = swapped["winner"].map({"a": "b", "b": "a", "tie": "tie"})
    assert Comparisons.from_frame(swapped, covariates=["length"]).covariate_scale["length"] == pytest.approx(
        data.covariate_scale["length"], rel=1e-12)  # whichever response is a


def test_canonical_orientation_flips_the_covariate():
    """Swapping item_a and item_b (and first, winner) gives the same cells: z changes sign with the pair."""
    df = pd.DataFrame({"record_id": [0, 1, 2, 3], "judge": ["j", "j", "j", "j"], "item_a": ["x", "y", "x", "y"],
                       "item_b": ["y", "x", "y", "x"], "first": ["a", "b", "b", "a"], "winner": ["a", "b", "b", "a"],
                       "len_a": [5.0, 2.0, 1.0, 3.0], "len_b": [2.0, 5.0, 3.0, 1.0]})
    d = Comparisons.from_frame(df, covariates=["len"])
    cells = d.llm_cells()
    # rows 0 and 1 are the same judgment in both orientations (x shown first, x wins, x longer by 3)
    sd = np.std([3.0, -3.0, -2.0, 2.0])
    assert len(cells) == 2
    assert sorted(cells["z_len"] * sd) == pytest.approx([-2.0, 3.0])
    row = cells[np.isclose(cells["z_len"] * sd, 3.0)].iloc[0]
    assert (row["a"], row["n"], row["y"]) == (1, 2, 2)


def test_cells_split_by_covariate_value_and_counts_agree(frame, data):
    assert data.n_llm == int(((frame.judge != "human") & frame.winner.isin(["a", "b"])).sum())
    assert len(data.llm) == data.n_llm  # every judgment has its own length difference here
    no_cov = Comparisons.from_frame(frame)
    assert len(no_cov.llm) < len(data.llm)
    assert no_cov.llm.z is None and no_cov.covariates == ()


def test_counts_and_files_equal_the_rows(frame, data, tmp_path):
    counts = frame.assign(wins_a=(frame.winner == "a").astype(int), wins_b=(frame.winner == "b").astype(int),
                          ties=(frame.winner == "tie").astype(int))
    c = Comparisons.from_counts(counts[["judge", "item_a", "item_b", "first", "wins_a", "wins_b", "ties", "length_a",
                                        "length_b"]], covariates=["length"])
    key = ["judge", "item_i", "item_j", "a", "z_length", "n", "y"]
    ref = data.llm_cells().sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(c.llm_cells().sort_values(key).reset_index(drop=True), ref)
    assert c.covariate_scale["length"] == pytest.approx(data.covariate_scale["length"], rel=1e-12)
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    r = pydial.read_comparisons(path, covariates=["length"], chunksize=700)
    got = r.llm_cells().sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[key[:-3] + ["n", "y"]], ref[key[:-3] + ["n", "y"]])
    np.testing.assert_allclose(got["z_length"], ref["z_length"], rtol=1e-12)


def test_tie_cells_carry_the_covariate(frame, data):
    t = data.cell_table("llm", with_ties=True)
    assert t.z is not None and t.z.shape == (len(t), 1)
    assert int(t.tie_counts.sum()) == int(((frame.judge != "human") & (frame.winner == "tie")).sum())


@pytest.mark.parametrize("change, message", [
    (lambda d: d.assign(length_a=d.length_a.where(d.index % 97 != 3)), "missing values in covariate column 'length_a'"),
    (lambda d: d.assign(length_b=d.length_b.astype(object).where(d.index != 5, "long")),
     "non-numeric values in covariate column 'length_b' at rows [5]"),
    (lambda d: d.assign(length_b=d.length_a), "covariate 'length' is constant"),
    (lambda d: d.drop(columns="length_b"), "missing covariate column(s) ['length_b']"),
])
def test_bad_covariates_are_named(frame, change, message):
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        Comparisons.from_frame(change(frame), covariates=["length"])


def test_normalized_transform(frame):
    d = Comparisons.from_frame(frame, covariates=["length"], covariate_transform="normalized")
    ratio = (frame.length_a - frame.length_b) / (frame.length_a + frame.length_b)
    assert d.covariate_scale["length"] == pytest.approx(np.sqrt(np.mean(ratio ** 2)), rel=1e-12)
    assert d.covariate_transform == "normalized"


# ------------------------------------------------------------------ models
def test_judges_equal_statsmodels(frame, data):
    """Each judge's order-effect BTL with a covariate: estimates and standard errors of statsmodels' GLM."""
    res = pydial.fit(data, "judges")
    scale = data.covariate_scale["length"]
    for k in ("j1", "j2"):
        m, mc = _statsmodels(frame, k, scale)
        row = res.covariate_effects.loc[(k, "length")]
        assert row["beta"] == pytest.approx(m.params[-1], abs=1e-7)
        assert res.position_effects.loc[k, "b"] == pytest.approx(m.params[-2], abs=1e-7)
        assert res.with_cov("fisher").covariate_effects.loc[(k, "length"), "se"] == pytest.approx(m.bse[-1], rel=1e-6)
        assert res.with_cov("record").covariate_effects.loc[(k, "length"), "se"] == pytest.approx(mc.bse[-1],
                                                                                                  rel=1e-6)
        N = len(data.items)
        s = np.append(m.params[: N - 1], -m.params[: N - 1].sum())
        np.testing.assert_allclose(res.judge_scores.loc[k].to_numpy(), s, atol=1e-7)


def test_human_equals_statsmodels(frame, data):
    res = pydial.fit(data, "human")
    m, _ = _statsmodels(frame, "human", data.covariate_scale["length"], order=False)
    assert res.covariate_effects.loc[("human", "length"), "beta"] == pytest.approx(m.params[-1], abs=1e-7)
    assert res.covariate_effects.loc[("human", "length"), "se"] == pytest.approx(m.bse[-1], rel=1e-6)
    assert "style-controlled at z = 0" in res.summary()
    assert "Covariate effects beta" in res.summary()


def test_wald_tests(data):
    res = pydial.fit(data, "judges")
    ce, C = res.covariate_effects, res.covariate_effects_cov
    t = res.covariate_test("j1")
    assert t["z"] == pytest.approx(ce.loc[("j1", "length"), "z"], rel=1e-10)
    assert t["p_value"] < 1e-6  # j1 carries the bias
    d = res.covariate_test("j1", against="j2")
    var = (C.loc[("j1", "length"), ("j1", "length")] + C.loc[("j2", "length"), ("j2", "length")]
           - 2 * C.loc[("j1", "length"), ("j2", "length")])
    assert d["difference"] == pytest.approx(ce.loc[("j1", "length"), "beta"] - ce.loc[("j2", "length"), "beta"])
    assert d["se"] == pytest.approx(np.sqrt(var), rel=1e-10)
    with pytest.raises(KeyError, match="no covariate effects for 'human'"):
        res.covariate_test("j1", against="human")
    with pytest.raises(ArgumentError, match=r"covariates: \['length'\] given more than once"):  # not chi2 on 2 df
        res.covariate_test("j1", covariates=["length", "length"])


def test_ties_and_firth_fit_with_covariates(data):
    tie = pydial.fit(data, "judges", ties="davidson")
    assert tie.covariate_effects.loc[("j1", "length"), "beta"] > 0.5
    assert tie.tie_parameters is not None
    firth = pydial.fit(data, "human", penalty="firth")
    plain = pydial.fit(data, "human")
    b_f = firth.covariate_effects.loc[("human", "length"), "beta"]
    b_p = plain.covariate_effects.loc[("human", "length"), "beta"]
    assert abs(b_f) < abs(b_p) and b_f == pytest.approx(b_p, rel=0.05)  # shrunk towards 0 by O(1/n)


# ------------------------------------------------------------------ simulation
def test_simulated_length_bias_is_recovered():
    beta = np.array([[0.6, 0.1], [0.3, 0.0], [0.05, 0.0]])
    sim = pydial.simulate(N=8, K=2, n_llm=40_000, n_human=20_000, covariates=["length", "lists"], beta=beta, seed=3)
    d = sim.comparisons
    sc = d.covariate_scale.to_numpy()
    j = pydial.fit(d, "judges")
    h = pydial.fit(d, "human")
    est = np.vstack([j.covariate_effects["beta"].to_numpy().reshape(2, 2), h.covariate_effects["beta"].to_numpy()])
    se = np.vstack([j.covariate_effects["se"].to_numpy().reshape(2, 2), h.covariate_effects["se"].to_numpy()])
    assert np.all(np.abs(est / sc - beta) < 4 * se / sc)
    assert np.corrcoef(h.scores["score"], sim.truth.s_h)[0, 1] > 0.99


def test_simulation_without_covariates_is_unchanged():
    a = pydial.simulate(N=6, K=2, n_llm=300, n_human=50, seed=1).frame
    b = pydial.simulate(N=6, K=2, n_llm=300, n_human=50, seed=1, covariates=["x"]).frame
    pd.testing.assert_frame_equal(a, b[a.columns])
    with pytest.raises(ArgumentError, match="beta= needs covariates="):
        pydial.simulate(N=6, K=2, n_llm=10, n_human=5, beta=1.0)
    with pytest.raises(ArgumentError, match="beta must be"):
        pydial.simulate(N=6, K=2, n_llm=10, n_human=5, covariates=["x"], beta=np.ones((2, 2)))
    for beta in (np.inf, [np.nan], np.full((3, 1), np.inf)):  # a number, a vector per covariate, the full array
        with pytest.raises(ArgumentError, match="beta must be finite"):
            pydial.simulate(N=6, K=2, n_llm=10, n_human=5, covariates=["x"], beta=beta)


# ------------------------------------------------------------------ design checks
def test_covariate_constant_within_a_judges_pairs_is_refused():
    """A covariate fixed per item (x_a = f(item_a)) is a linear function of the item differences: confounded."""
    rng = np.random.default_rng(4)
    items = [f"m{i}" for i in range(5)]
    size = dict(zip(items, [1.0, 3.0, 2.0, 7.0, 4.0]))
    rows = []
    for r in range(600):
        a, b = rng.choice(items, 2, replace=False)
        for k in ("j1", "human"):
            rows.append(dict(record_id=r, judge=k, item_a=a, item_b=b, first=rng.choice(["a", "b"]),
                             winner=rng.choice(["a", "b"]), size_a=size[a], size_b=size[b],
                             noise_a=rng.normal(), noise_b=rng.normal()))
    d = Comparisons.from_frame(pd.DataFrame(rows), covariates=["noise", "size"])
    rep = pydial.check_design(d, method="judges")
    bad = rep.problems.set_index("judge")
    assert "size" in bad.loc["j1", "detail"] and "noise" not in bad.loc["j1", "detail"].split("[")[1]
    with pytest.raises(pydial.IdentifiabilityError, match="covariate"):
        pydial.fit(d, "judges")
    with pytest.raises(pydial.IdentifiabilityError, match="covariate"):
        pydial.fit(d, "human")
    ok = Comparisons.from_frame(pd.DataFrame(rows), covariates=["noise"])
    assert pydial.check_design(ok, method="judges").ok


def test_command_line_reads_covariates_and_writes_their_table(frame, tmp_path):
    from pydial.cli import main

    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "out"
    main(["fit", str(path), "--method", "judges", "--covariates", "length", "--out", str(out)])
    tab = pd.read_csv(out / "covariate_effects.csv")
    ref = pydial.fit(Comparisons.from_frame(frame, covariates=["length"]), "judges").covariate_effects
    np.testing.assert_allclose(tab["beta"], ref["beta"].to_numpy(), rtol=1e-6)
    assert (out / "covariate_effects.png").exists()
    assert "style-controlled" in (out / "report.md").read_text()


@pytest.mark.parametrize("transform", ["difference", "normalized"])
def test_to_frame_round_trips_the_covariates(frame, transform):
    d = Comparisons.from_frame(frame, covariates=["length"], covariate_transform=transform)
    back = Comparisons.from_frame(d.to_frame(), covariates=["length"], covariate_transform=transform, items=list(d.items))
    assert back.covariate_scale["length"] == pytest.approx(d.covariate_scale["length"], rel=1e-12)
    np.testing.assert_allclose(back.llm.z, d.llm.z, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(back.llm.n, d.llm.n)
    np.testing.assert_allclose(back.human.z, d.human.z, rtol=1e-12, atol=1e-12)
