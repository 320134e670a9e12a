"""pydial.studies.robustness on small both-order data: the perturbed training data of each
sweep (counted by hand), record splits, nested budgets, resume, determinism across worker
counts, failures counted and not averaged, the calibration arms and the argument checks."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import pydial
from pydial.exceptions import ArgumentError, ConvergenceError, DataError
from pydial.studies import robustness as R
from pydial.studies.robustness_sweeps import display_subset, inject_anti_consensus, rng_for, split_records

ITEMS = [f"m{i}" for i in range(5)]
METHODS = ("human", "dial-anc")


def both_order(n_records: int = 200, judges=("j0", "j1", "j2"), b=(0.8, -0.5, 0.1), seed: int = 0,
               orders=("a", "b")) -> pd.DataFrame:
    """One human label per record and every judge in each display order of ``orders``."""
    rng = np.random.default_rng(seed)
    s = np.linspace(-1, 1, len(ITEMS))
    rows = []
    for r in range(n_records):
        i, j = sorted(rng.choice(len(ITEMS), 2, replace=False))
        rows.append((f"r{r:04d}", "human", ITEMS[i], ITEMS[j], "a", "a" if rng.random() < expit(s[i] - s[j]) else "b"))
        for k, name in enumerate(judges):
            for first in orders:
                p = expit(s[i] - s[j] + (1 if first == "a" else -1) * b[k])
                rows.append((f"r{r:04d}", name, ITEMS[i], ITEMS[j], first, "a" if rng.random() < p else "b"))
    return pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])


@pytest.fixture(scope="module")
def data():
    return pydial.Comparisons.from_frame(both_order(), items=ITEMS)


@pytest.fixture(scope="module")
def st(data):
    return R.study(data, methods=METHODS, seed=5)


def _canon(df):
    return df.drop(columns=["fit_seconds"]).sort_values(["sweep", "setting", "split", "arm", "method"]) \
        .reset_index(drop=True)


def test_display_subset_by_hand():
    rows = pd.DataFrame({"first": list("abbabbab"), "winner": "a"})  # 3 canonical-first, 5 swapped
    for rho, n_b in ((0.0, 0), (0.4, 2), (0.5, 2), (1.0, 5)):  # round(0.5 * 5) = 2 (banker's rounding)
        keep = display_subset(rows, rho, seed=1, split=0)
        assert keep[rows["first"] == "a"].all() and keep.sum() == 3 + n_b
    small, large = display_subset(rows, 0.4, 1, 0), display_subset(rows, 1.0, 1, 0)
    assert (large | ~small).all()  # nested in rho


def test_display_sweep_keeps_canonical_first_and_a_fraction_of_swapped(st):
    pools = R.pools(st, 0)
    llm = st.data.long.loc[pools["llm"]]
    n_a, n_b = int((llm["first"] == "a").sum()), int((llm["first"] == "b").sum())
    assert n_a == n_b > 100  # balanced both-order train pool
    sweep = R.display_imbalance((1.0, 0.3, 0.0), n_human=50)
    kept = {}
    for rho in sweep.values:
        frame, _ = R.training_frame(st, sweep, rho, 0)
        f = frame.loc[frame["judge"] != "human"]
        assert (f["first"] == "a").sum() == n_a and (f["first"] == "b").sum() == round(rho * n_b)
        assert (frame["judge"] == "human").sum() == 50
        kept[rho] = set(map(tuple, f.loc[f["first"] == "b", ["record_id", "judge"]].to_numpy()))
    assert kept[0.0] <= kept[0.3] <= kept[1.0]


def test_splits_keep_both_orders_of_a_record_together(st):
    long = st.data.long
    for split in (0, 1):
        p = R.pools(st, split)
        train = set(long["record_id"].iloc[p["train"]])
        test = set(long["record_id"].iloc[p["test"]])
        assert not train & test and len(train) == round(0.7 * 200) == p["n_train_records"]
        frame, _ = R.training_frame(st, R.display_imbalance((1.0,), n_human=50), 1.0, split)
        assert set(frame["record_id"]) <= train
        llm = frame.loc[frame["judge"] != "human"]
        orders = llm.groupby(["record_id", "judge"])["first"].agg(lambda x: "".join(sorted(x)))
        assert (orders == "ab").all()  # every train record keeps both display orders of every judge
    assert set(long["record_id"].iloc[R.pools(st, 0)["train"]]) != set(long["record_id"].iloc[R.pools(st, 1)["train"]])


def test_stratified_split_splits_each_subset():
    records = np.array([f"r{i:03d}" for i in range(100)], dtype=object)
    subsets = (("x", tuple(records[:30])), ("y", tuple(records[30:50])))
    train = split_records(records, 3, 0, 0.7, subsets)
    assert len(train & set(records[:30])) == 21 and len(train & set(records[30:50])) == 14
    assert len(train & set(records[50:])) == 35


def test_pure_position_judges_follow_first_position(st):
    sweep = R.pure_position((0, 3), n_human=50, prob=0.8, template="j1")
    frame, info = R.training_frame(st, sweep, 3, 0)
    assert info == {"n_injected": 3, "sources": "j1"}
    tpl = frame.loc[frame["judge"] == "j1"].reset_index(drop=True)
    for t in (1, 2, 3):
        inj = frame.loc[frame["judge"] == f"pure-position-{t:02d}"].reset_index(drop=True)
        assert len(inj) == len(tpl) > 200
        for c in ("record_id", "item_a", "item_b", "first"):
            assert (inj[c] == tpl[c]).all()
        rate = float((inj["winner"] == inj["first"]).mean())
        assert abs(rate - 0.8) < 3 * np.sqrt(0.8 * 0.2 / len(inj))
    base, info0 = R.training_frame(st, sweep, 0, 0)
    assert info0["n_injected"] == 0 and not base["judge"].str.startswith("pure-position").any()


def test_anti_consensus_verdicts_are_exact_flips(st):
    sweep = R.anti_consensus((0, 2), n_human=50, n_llm=400)
    frame, info = R.training_frame(st, sweep, 2, 1)
    src = info["sources"]
    assert src in st.data.judges and frame["judge"].isin(st.data.judges).sum() == 400
    real = frame.loc[frame["judge"] == src].reset_index(drop=True)
    for t in (1, 2):
        inj = frame.loc[frame["judge"] == f"anti-consensus-{t:02d}"].reset_index(drop=True)
        assert len(inj) == len(real) > 0
        assert (inj[["record_id", "item_a", "item_b", "first"]] == real[["record_id", "item_a", "item_b", "first"]]).all().all()
        assert (inj["winner"] == real["winner"].map({"a": "b", "b": "a"})).all()
    rows = pd.DataFrame({"judge": ["x", "y", "x"], "winner": ["a", "b", "tie"]})
    assert list(inject_anti_consensus(rows, "x", 1)[0]["winner"]) == ["b", "tie"]


def test_budgets_are_nested(st):
    cols = ["record_id", "judge", "first", "winner"]
    h = R.human_budget((30, 60))
    small, _ = R.training_frame(st, h, 30, 0)
    large, _ = R.training_frame(st, h, 60, 0)
    hs, hl = (f.loc[f["judge"] == "human", cols] for f in (small, large))
    assert len(hs) == 30 and len(hl) == 60
    assert set(map(tuple, hs.to_numpy())) <= set(map(tuple, hl.to_numpy()))
    ll = R.llm_budget((150, 300, np.inf), n_human=40)
    frames = [R.training_frame(st, ll, v, 0)[0] for v in ll.values]
    sets = [set(f.loc[f["judge"] != "human"].index.map(lambda i, f=f: tuple(f.loc[i, cols]))) for f in frames]
    assert [len(f) - 40 for f in frames[:2]] == [150, 300] and sets[0] <= sets[1] <= sets[2]
    with pytest.raises(ArgumentError, match="n_human"):
        R.training_frame(st, R.human_budget((10_000,)), 10_000, 0)


def test_resume_skips_finished_tasks_and_gives_identical_results(data, tmp_path):
    sweeps = [R.display_imbalance((1.0, 0.0), n_human=60), R.pure_position((0, 2), n_human=60)]
    full = R.run(data, sweeps, splits=2, methods=METHODS, out=tmp_path / "a", seed=3)
    assert len(full) == 2 * 2 * 2 * len(METHODS) and set(full["status"]) == {"ok"}
    path = tmp_path / "a" / "display.csv"
    df = pd.read_csv(path)
    drop = ((df["setting"] == 0.0) & (df["split"] == 1)) | ((df["setting"] == 1.0) & (df["split"] == 0)
                                                            & (df["method"] == "dial-anc"))
    df.loc[~drop].to_csv(path, index=False)
    st = R.study(data, methods=METHODS, seed=3)
    assert sorted(R.pending_tasks(st, sweeps[0], 2, tmp_path / "a")) == [(0.0, 1), (1.0, 0)]
    again = R.run(data, sweeps, splits=2, methods=METHODS, out=tmp_path / "a", seed=3)
    pd.testing.assert_frame_equal(_canon(again), _canon(full))
    assert R.run_sweep(st, sweeps[1], 2, tmp_path / "a")["tasks_run"] == 0
    with pytest.raises(ArgumentError, match="another configuration"):
        R.run(data, sweeps, splits=2, methods=METHODS, out=tmp_path / "a", seed=4)


def test_same_seed_same_results_with_one_or_two_workers(data, tmp_path):
    sweeps = [R.anti_consensus((0, 1), n_human=60, n_llm=300)]
    one = R.run(data, sweeps, splits=2, methods=METHODS, n_jobs=1, seed=9)
    two = R.run(data, sweeps, splits=2, methods=METHODS, out=tmp_path, n_jobs=2, seed=9)
    pd.testing.assert_frame_equal(_canon(one), _canon(two), check_dtype=False)
    other = R.run(data, sweeps, splits=1, methods=METHODS, n_jobs=1, seed=10)
    assert not np.allclose(other["excess_loss"], one.loc[one["split"] == 0, "excess_loss"].to_numpy())


def test_failures_are_counted_not_averaged(data, monkeypatch):
    real_fit = pydial.fit

    def fit(d, method, **kw):
        if method == "dial-anc" and d.n_human == 60:
            raise ConvergenceError("no admissible candidate")
        return real_fit(d, method, **kw)

    monkeypatch.setattr(pydial, "fit", fit)
    df = R.run(data, [R.human_budget((4, 60))], splits=2, methods=METHODS, seed=1)
    tiny = df.loc[(df["setting"] == 4) & (df["method"] == "human")]
    assert (tiny["status"] == "not_finite").all() and tiny["excess_loss"].isna().all()
    failed = df.loc[(df["setting"] == 60) & (df["method"] == "dial-anc")]
    assert (failed["status"] == "failed").all() and failed["message"].str.startswith("ConvergenceError").all()
    s = R.summarize(df).set_index(["setting", "method"])
    assert s.loc[(4.0, "human"), "n_not_finite"] == 2 and np.isnan(s.loc[(4.0, "human"), "excess_mean"])
    assert s.loc[(60.0, "dial-anc"), "n_failed"] == 2 and s.loc[(60.0, "dial-anc"), "n_ok"] == 0
    ok = df.loc[(df["setting"] == 60) & (df["method"] == "human"), "excess_loss"]
    assert s.loc[(60.0, "human"), "excess_mean"] == pytest.approx(ok.mean())
    assert s.loc[(60.0, "human"), "excess_se"] == pytest.approx(ok.std(ddof=1) / np.sqrt(2))


def test_calibration_arms(data):
    ids = list(data.record_ids)
    sweep = R.calibration({"first": ids[:120], "rest": ids[120:]}, (np.inf,), consensus=("global", "subset"))
    df = R.run(data, [sweep], splits=1, methods=("dial-anc",), seed=2)
    assert sorted(df["arm"]) == ["first:global", "first:subset", "rest:global", "rest:subset"]
    ok = df.loc[df["status"] == "ok"]
    assert len(ok) and ok["ct_p_value"].between(0, 1).all() and (ok["ct_df"] >= 1).all()
    by = df.set_index("arm")
    assert by.loc["first:global", "n_llm"] > by.loc["first:subset", "n_llm"]  # global: every train record
    assert by.loc["first:global", "n_human"] == by.loc["first:subset", "n_human"] == round(0.7 * 120)
    s = R.summarize(df)
    assert set(s["arm"]) == set(df["arm"]) and s["reject_rate"].dropna().between(0, 1).all()


def test_argument_checks(data, st):
    one = pydial.Comparisons.from_frame(both_order(60, orders=("a",)), items=ITEMS)
    with pytest.raises(ArgumentError, match="both display orders"):
        R.run(one, ["display"], splits=1, methods=METHODS)
    with pytest.raises(ArgumentError, match="judges"):
        R.study(data, judges=["nope"])
    with pytest.raises(ArgumentError, match="methods"):
        R.study(data, methods=["bogus"])
    with pytest.raises(ArgumentError, match="rho_swap"):
        R.display_imbalance((1.5,))
    with pytest.raises(ArgumentError, match="disjoint"):
        R.calibration({"x": ["r0000"], "y": ["r0000"]})
    with pytest.raises(ArgumentError, match="unknown sweep"):
        R.sweep_by_name("calibration")
    with pytest.raises(ArgumentError, match="template"):
        R.run_sweep(st, R.pure_position((1,), template="zz"), 1)
    agg = pydial.Comparisons.from_counts(pd.DataFrame({"judge": ["j", "human"], "item_a": ["m0", "m0"],
                                                       "item_b": ["m1", "m1"], "first": ["a", "a"],
                                                       "wins_a": [3, 2], "wins_b": [1, 1], "ties": [0, 0]}))
    with pytest.raises(DataError, match="record ids"):
        R.study(agg)


def test_seeds_are_crc32_keyed():
    import zlib

    a = rng_for(7, "swap", 3).integers(1 << 30, size=4)
    b = np.random.default_rng(np.random.SeedSequence([7, zlib.crc32(b"swap"), 3])).integers(1 << 30, size=4)
    assert np.array_equal(a, b)


def test_plot(data):
    import matplotlib

    matplotlib.use("Agg")
    df = R.run(data, [R.display_imbalance((1.0, 0.0), n_human=60), R.llm_budget((300, np.inf), n_human=60)],
               splits=2, methods=METHODS, seed=1)
    fig = R.plot(R.summarize(df))
    assert len(fig.axes) == 4


def test_command_line(tmp_path):
    from pydial.cli import main

    path = tmp_path / "both.csv"
    both_order(120).to_csv(path, index=False)
    argv = [str(path), "--out", str(tmp_path / "out"), "--sweeps", "display", "--splits", "1", "--methods",
            "human,dial-anc", "--n-human", "40", "--seed", "4"]
    assert main(["robustness", *argv]) == 0
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert set(summary["method"]) == {"human", "dial-anc"} and (tmp_path / "out" / "robustness.png").exists()
    rows = pd.read_csv(tmp_path / "out" / "display.csv")
    assert len(rows) == 5 * 2 and (rows["n_human"] == 40).all()
    assert main(["robustness", *argv]) == 0  # resumed: nothing to redo
    assert len(pd.read_csv(tmp_path / "out" / "display.csv")) == 10
