"""Real-data protocol (analyses/realdata/protocol.py, on pydial.studies.robustness) in quick mode on the bundled Arena data:
schema, determinism (same seed, jobs 1 vs 2), resume, non-finite fits recorded but not
averaged, and the injected pure-position / anti-consensus judges."""

import dataclasses
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydial  # noqa: E402
from pydial.studies import robustness  # noqa: E402

from analyses.realdata import protocol as P  # noqa: E402
from analyses.realdata.report import aggregate  # noqa: E402

CFG = P.QUICK
SWEEPS = ("human_budget", "pure_position", "anti_consensus", "llm_budget")
VOLATILE = ["fit_seconds"]


def _canon(df: pd.DataFrame) -> pd.DataFrame:
    return (df.drop(columns=VOLATILE).sort_values(["setting", "split", "method"]).reset_index(drop=True))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("realdata")
    stats = P.run(CFG, out, sweeps=SWEEPS, jobs=1, progress=False)
    return out, stats


def test_schema(quick):
    out, stats = quick
    for sweep in SWEEPS:
        df = pd.read_csv(out / f"{sweep}.csv")
        assert list(df.columns) == list(P.COLUMNS)
        assert set(df["status"]) <= set(P.STATUSES)
        assert (df["config_id"] == CFG.config_id(sweep)).all()
        keys = df.groupby(["setting", "split", "method"]).size()
        assert (keys == 1).all() and len(keys) == len(CFG.settings(sweep)) * CFG.splits * len(CFG.methods)
        ok = df.loc[df["status"] == "ok"]
        assert len(ok) > 0
        assert (ok["excess_loss"] > -1e-8).all()  # s_test minimizes the test loss
        assert ok["kendall_tau"].between(-1, 1).all()
        assert np.allclose(ok["excess_loss"], ok["loss_test"] - ok["loss_ref"])
        assert stats[sweep]["tasks_run"] == len(CFG.settings(sweep)) * CFG.splits
    hb = pd.read_csv(out / "human_budget.csv")
    assert (hb["n_human"] == hb["setting"]).all()
    assert (hb["n_test_human"] > 5000).all() and (hb["n_train_records"] + hb["n_test_records"] == 26910).all()
    lb = pd.read_csv(out / "llm_budget.csv")
    assert (lb.loc[lb["setting"] == 1000, "n_llm"] == 1000).all()
    assert (lb.loc[np.isinf(lb["setting"]), "n_llm"] > 40000).all()


def test_nonfinite_human_recorded_not_averaged(quick):
    out, _ = quick
    df = pd.read_csv(out / "human_budget.csv")
    tiny = df.loc[df["setting"] == 20]
    for m in ("human", "atc"):
        r = tiny.loc[tiny["method"] == m]
        assert (r["status"] == "not_finite").all(), r
        assert r["excess_loss"].isna().all() and r["message"].str.contains("IdentifiabilityError").all()
    assert (tiny.loc[tiny["method"].isin(["dial-anc", "dial-ada"]), "status"] == "ok").all()
    agg = aggregate(df)
    h = agg.loc[(agg["setting"] == 20) & (agg["method"] == "human")].iloc[0]
    assert h["n_ok"] == 0 and h["frac_finite"] == 0 and np.isnan(h["excess_mean"])
    # a partly finite cell averages only its finite splits
    mixed = df.copy()
    sel = (mixed["setting"] == 400) & (mixed["method"] == "dial-anc") & (mixed["split"] == 0)
    mixed.loc[sel, ["status", "excess_loss", "kendall_tau"]] = ["not_finite", np.nan, np.nan]
    a = aggregate(mixed)
    a = a.loc[(a["setting"] == 400) & (a["method"] == "dial-anc")].iloc[0]
    keep = df.loc[(df["setting"] == 400) & (df["method"] == "dial-anc") & (df["split"] == 1), "excess_loss"]
    assert a["n_ok"] == 1 and a["frac_finite"] == 0.5 and a["excess_mean"] == pytest.approx(float(keep.iloc[0]))


def test_determinism_same_seed(quick):
    out, _ = quick
    first = pd.DataFrame(P.run_task(CFG, "human_budget", 400.0, 1))
    P.study.cache_clear()
    again = pd.DataFrame(P.run_task(CFG, "human_budget", 400.0, 1))
    pd.testing.assert_frame_equal(first.drop(columns=VOLATILE), again.drop(columns=VOLATILE))
    stored = pd.read_csv(out / "human_budget.csv")
    stored = stored.loc[(stored["setting"] == 400) & (stored["split"] == 1)].reset_index(drop=True)
    assert np.allclose(stored["excess_loss"], first["excess_loss"], equal_nan=True, rtol=0, atol=1e-12)
    # another seed gives another split
    other = dataclasses.replace(CFG, seed=CFG.seed + 1)
    assert not np.array_equal(robustness.pools(P.study(other), 0)["human"], robustness.pools(P.study(CFG), 0)["human"])


def test_seeds_are_stable_not_hash():
    a = P.rng_for(7, "human", 3).integers(1 << 30, size=4)
    b = np.random.default_rng(np.random.SeedSequence([7, zlib.crc32(b"human"), 3])).integers(1 << 30, size=4)
    assert np.array_equal(a, b)


def test_jobs_1_vs_2_identical(quick, tmp_path):
    out, _ = quick
    # one split, two tasks: each of the two worker processes computes one
    P.run(dataclasses.replace(CFG, splits=1), tmp_path, sweeps=["anti_consensus"], jobs=2, progress=False)
    one = pd.read_csv(out / "anti_consensus.csv")
    one = one.loc[one["split"] == 0]
    two = pd.read_csv(tmp_path / "anti_consensus.csv")
    assert len(two) == 2 * len(CFG.methods)
    pd.testing.assert_frame_equal(_canon(one), _canon(two))


def test_resume(quick, tmp_path):
    out, _ = quick
    src = pd.read_csv(out / "llm_budget.csv")
    # a partial file: one task missing, another task with one method missing
    drop = ((src["setting"] == 1000) & (src["split"] == 1)) | (
        np.isinf(src["setting"]) & (src["split"] == 0) & (src["method"] == "dial-ada"))
    src.loc[~drop].to_csv(tmp_path / "llm_budget.csv", index=False)
    assert sorted(P.pending_tasks(CFG, "llm_budget", tmp_path)) == [(1000.0, 1), (float("inf"), 0)]
    stats = P.run(CFG, tmp_path, sweeps=["llm_budget"], jobs=1, progress=False)
    assert stats["llm_budget"]["tasks_run"] == 2
    pd.testing.assert_frame_equal(_canon(pd.read_csv(tmp_path / "llm_budget.csv")), _canon(pd.read_csv(out / "llm_budget.csv")))
    assert P.run(CFG, tmp_path, sweeps=["llm_budget"], jobs=1, progress=False)["llm_budget"]["tasks_run"] == 0
    # rows of another configuration are never mixed in
    with pytest.raises(pydial.ArgumentError, match="another configuration"):
        P.pending_tasks(dataclasses.replace(CFG, llm_n_human=500), "llm_budget", tmp_path)


def test_pure_position_judges():
    frame, info = P.task_frame(CFG, "pure_position", 2.0, 0)
    _, _, long = P.base_data()
    train = robustness.pools(P.study(CFG), 0)["train"]
    tpl = long.loc[train[(long["judge"] == CFG.pure_template).to_numpy()[train]]]
    assert info["n_injected"] == 2
    for t in (1, 2):
        inj = frame.loc[frame["judge"] == f"{P.PURE_PREFIX}{t:02d}"]
        assert len(inj) == len(tpl) > 15000
        assert (inj["record_id"].to_numpy() == tpl["record_id"].to_numpy()).all()
        assert (inj["first"].to_numpy() == tpl["first"].to_numpy()).all()  # same display orders as the template
        assert inj["winner"].isin(["a", "b"]).all()
        rate = (inj["winner"] == inj["first"]).mean()
        assert abs(rate - CFG.pure_prob) < 0.01
    a, b = (frame.loc[frame["judge"] == f"{P.PURE_PREFIX}{t:02d}", "winner"].to_numpy() for t in (1, 2))
    assert (a != b).mean() > 0.1  # independent draws
    # nested: the judges of m = 2 are those of m = 4
    frame4, _ = P.task_frame(CFG, "pure_position", 4.0, 0)
    assert (frame4.loc[frame4["judge"] == f"{P.PURE_PREFIX}01", "winner"].to_numpy() == a).all()
    # only train records: recompute the record split independently
    rec = np.array(sorted(long["record_id"].unique().tolist()), dtype=object)
    perm = np.random.default_rng(np.random.SeedSequence([CFG.seed, zlib.crc32(b"split"), 0])).permutation(rec.size)
    train = set(rec[perm[: round(CFG.train_frac * rec.size)]].tolist())
    assert frame["record_id"].isin(train).all() and len(set(frame["record_id"])) > 15000


def test_anti_consensus_judges_are_exact_flips():
    frame, info = P.task_frame(CFG, "anti_consensus", 2.0, 1)
    src = P.anti_source(CFG, 1)
    assert info["sources"] == src and src in CFG.judges
    real = frame.loc[frame["judge"] == src].reset_index(drop=True)
    n_real = frame["judge"].isin(CFG.judges).sum()
    assert n_real == CFG.anti_n_llm
    flip = {"a": "b", "b": "a"}
    for t in (1, 2):
        inj = frame.loc[frame["judge"] == f"{P.ANTI_PREFIX}{t:02d}"].reset_index(drop=True)
        assert len(inj) == len(real) > 0
        for c in ("record_id", "item_a", "item_b", "first"):
            assert (inj[c] == real[c]).all()
        assert (inj["winner"] == real["winner"].map(flip)).all()
    base, _ = P.task_frame(CFG, "anti_consensus", 0.0, 1)
    pd.testing.assert_frame_equal(base.reset_index(drop=True),
                                  frame.loc[~frame["judge"].str.startswith(P.ANTI_PREFIX)].reset_index(drop=True))
