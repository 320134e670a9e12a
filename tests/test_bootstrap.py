"""Record bootstrap of the whole procedure (pydial.estimation.bootstrap, ``DialResult.bootstrap``).

References: the resampling invariants (records intact, strata sizes kept), percentile
and basic intervals recomputed here from the raw draws, and the sandwich standard
errors of a regular fit (human BTL, one judgment per record), which the bootstrap
standard errors must approach.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.estimation.bootstrap import record_strata, resample_records
from pydial.estimation.selection import SIMULATION_MULTIPLES


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=300, seed=7)


def _grouped_frame():
    """Records of 3 rows (two judges and a human on the same pair)."""
    rng = np.random.default_rng(0)
    items = ["A", "B", "C", "D"]
    rows = []
    for t in range(120):
        a, b = rng.choice(4, 2, replace=False)
        for judge in ("j1", "j2"):
            rows.append((f"r{t}", judge, items[a], items[b], "a" if t % 2 else "b", "a" if rng.random() < 0.6 else "b"))
        if t < 40:
            rows.append((f"r{t}", "human", items[a], items[b], "a", "a" if a < b else "b"))
    return pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])


def test_resample_keeps_records_whole_and_strata_sizes():
    data = pydial.Comparisons.from_frame(_grouped_frame())
    boot = resample_records(data, np.random.default_rng(1))
    f = boot.frame
    sizes = f.groupby("record_id").size()
    assert set(sizes) <= {2, 3}
    with_h = f.loc[f["k"] == boot.K, "record_id"].nunique()
    assert with_h == 40 and f["record_id"].nunique() == 120
    assert boot.n_human == 40 and boot.n_llm == data.n_llm
    # a record drawn twice appears twice: some records repeat the same (pair, outcome) rows
    order, offsets, groups = record_strata(data)
    assert [g.size for g in groups] == [40, 80]
    np.testing.assert_array_equal(np.diff(offsets).sum(), len(data.frame))


def test_intervals_follow_from_the_draws(sim):
    res = pydial.fit(sim.comparisons, "dial-anc")
    bt = res.bootstrap(40, seed=3, progress=False)
    S = bt.draws["scores"]
    assert S.shape == (40, 6) and bt.n_failed == 0
    lo, hi = np.quantile(S, [0.025, 0.975], axis=0)
    est = res.scores["score"].to_numpy()
    np.testing.assert_allclose(bt.scores["pct_low"], lo)
    np.testing.assert_allclose(bt.scores["basic_high"], 2 * est - lo)
    items = list(res.items)
    d = S[:, 0] - S[:, 3]
    row = bt.contrast(items[0], items[3])
    assert row["pct_high"] == pytest.approx(np.quantile(d, 0.975))
    flipped = bt.contrast(items[3], items[0])
    assert flipped["pct_low"] == pytest.approx(-row["pct_high"]) and flipped["estimate"] == pytest.approx(-row["estimate"])
    assert bt.position_effects is not None and bt.position_effects.index.tolist() == list(res.judges)
    assert len(bt.contrasts) == 15


def test_reproducible_and_independent_of_workers(sim):
    res = pydial.fit(sim.comparisons, "dial-ada", multiples=SIMULATION_MULTIPLES)
    a = res.bootstrap(6, seed=11, progress=False)
    b = res.bootstrap(6, seed=11, n_jobs=2, progress=False)
    np.testing.assert_array_equal(a.draws["scores"], b.draws["scores"])
    dist = a.lambda_distribution()
    assert dist["share"].sum() == pytest.approx(1.0) and dist["count"].sum() == 6
    assert set(a.selection.columns) == {"lambda", "multiple", "rank", "converged"}


def test_rank_auto_is_reselected(sim):
    res = pydial.fit(sim.comparisons, "dial-ada", rank="auto", multiples=SIMULATION_MULTIPLES)
    bt = res.bootstrap(4, seed=2, progress=False)
    assert set(bt.selection["rank"]) <= {0, 1, 2}


def test_bootstrap_se_approaches_sandwich_for_a_regular_fit():
    sim = pydial.simulate(N=5, K=2, rank=1, n_llm=500, n_human=1500, seed=5)
    res = pydial.fit(sim.comparisons, "human", cov_type="record")
    bt = res.bootstrap(300, seed=4, progress=False)
    ratio = bt.scores["boot_se"] / res.scores["se"]
    assert np.all(np.abs(ratio - 1) < 0.2), ratio


def test_bad_arguments(sim):
    res = pydial.fit(sim.comparisons, "human")
    with pytest.raises(ValueError, match="by must be one of"):
        res.bootstrap(10, by="cell")
    with pytest.raises(ValueError, match="B must be"):
        res.bootstrap(1)
    with pytest.raises(ValueError, match="level"):
        res.bootstrap(10, level=1.5)


def test_dask_client_runs_the_replicates(sim):
    distributed = pytest.importorskip("distributed")
    res = pydial.fit(sim.comparisons, "human")
    local = res.bootstrap(5, seed=8, progress=False)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None):
        from pydial.estimation.bootstrap import _dask_client_active

        assert _dask_client_active()
        remote = res.bootstrap(5, seed=8, progress=False)
    np.testing.assert_array_equal(local.draws["scores"], remote.draws["scores"])
