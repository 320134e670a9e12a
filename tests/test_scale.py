"""Sparse end-to-end computation and big inputs.

* the factored (sparse) influence functions and meats equal a dense reference
  (dense cells x parameters matrices, the clustered sums written out) to 1e-10;
* the block-assembled Hessian equals the dense ``J^T diag(w) J`` reference;
* the vectorized cycle scan and the graph test for separation decide as the
  union-find and the linear program;
* counts: a fit on aggregated counts equals the fit on the rows they came from for
  every covariance that needs no record ids, and ``cov="record"`` is refused;
* the chunked reader (CSV, gzip CSV, Parquet) gives the same cells as ``from_frame``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import pydial
from pydial.cache import entries
from pydial.data.comparisons import Comparisons
from pydial.model.design_graphs import check_separation, no_separation_by_graph, scan_cycles, scan_cycles_fast
from pydial.estimation.glm import staged_fit
from pydial.inference.linearization import COV_TYPES
from pydial.inference.sandwich import Influence, finite_influence, staged_influence
from pydial.model.likelihood import Objective
from pydial.optim import pinv_sym

NO_RECORD_COVS = ("fisher", "binomial", "cell")


# ------------------------------------------------------------ dense reference
def dense_cov(U: np.ndarray, st, data: Comparisons, cov: str) -> np.ndarray:
    """The covariance from a dense influence matrix, cluster sums formed row by row in
    numpy (no sparse algebra): ``IF_v = w_v {(p_c - z_v) u_c - ubar_block}``."""
    n, y, p, w = st.n, st.y, st.p, st.w
    if cov == "fisher":
        return (U.T * (w**2 * n * p * (1 - p))) @ U
    ubar = {}
    for flag in (False, True):
        m = st.is_human == flag
        if m.any():
            ubar[flag] = ((n[m] * p[m] - y[m]) @ U[m]) / n[m].sum()
    # expand the cells into single comparisons (wins of i first, then losses)
    cell = np.repeat(np.arange(n.size), n.astype(int))
    z = np.concatenate([np.r_[np.ones(int(y[c])), np.zeros(int(n[c] - y[c]))] for c in range(n.size)])
    IF = w[cell, None] * ((p[cell] - z)[:, None] * U[cell] - np.array([ubar[bool(h)] for h in st.is_human[cell]]))
    if cov == "binomial":
        return IF.T @ IF
    if cov == "cell":
        L = data.llm
        llm_index = np.full(n.size, -1)
        llm_index[~st.is_human] = st.positions()[0]
        li = llm_index[cell]
        key = np.where(st.is_human[cell], -1 - np.arange(cell.size), (L.judge[li] * data.N + L.i[li]) * data.N + L.j[li])
    else:
        raise ValueError(cov)
    return cluster_gram(np.unique(key, return_inverse=True)[1], IF)


def cluster_gram(groups: np.ndarray, IF: np.ndarray) -> np.ndarray:
    """``sum_g (sum_{v in g} IF_v)(...)^T`` with a dense accumulation (``np.add.at``)."""
    G = np.zeros((groups.max() + 1, IF.shape[1]))
    np.add.at(G, groups, IF)
    return G.T @ G


def record_cov(U: np.ndarray, st, data: Comparisons) -> np.ndarray:
    """Record-clustered covariance from the decisive rows, dense."""
    R = data.rows
    li, hi = st.positions()
    where = {(False, int(c)): int(t) for t, c in zip(np.flatnonzero(~st.is_human), li)}
    where.update({(True, int(c)): int(t) for t, c in zip(np.flatnonzero(st.is_human), hi)})
    pos = np.array([where.get((bool(k == data.K), int(c)), -1) for k, c in zip(R.judge, R.cell)])
    use = pos >= 0
    pos, z, rec = pos[use], R.z[use], R.record[use]
    n, y, p, w = st.n, st.y, st.p, st.w
    ubar = {f: ((n[m] * p[m] - y[m]) @ U[m]) / n[m].sum() for f in (False, True) for m in [st.is_human == f] if m.any()}
    IF = w[pos, None] * ((p[pos] - z)[:, None] * U[pos] - np.array([ubar[bool(h)] for h in st.is_human[pos]]))
    return cluster_gram(rec, IF)


@pytest.fixture(scope="module")
def small():
    sim = pydial.simulate(N=7, K=3, rank=1, n_llm=3000, n_human=300, seed=5)
    f = sim.frame.copy()
    f["record_id"] = np.random.default_rng(1).integers(0, 500, len(f))  # records span judges and humans
    return Comparisons.from_frame(f, items=list(sim.truth.items))


def test_sparse_influence_and_meats_equal_dense_reference(small):
    d = small
    res = pydial.fit(d, "dial-ada", lambda_=[d.n_llm / d.n_human], include_endpoints=False)
    ch, th, lam = res.chart, res.theta, res.lambda_
    obj = Objective.weighted(ch, d, lam)
    H = obj.value_grad_hess(th)[2]
    Hp, _ = pinv_sym(H)
    # dense influence in theta coordinates, independent of the factored form
    U_ref = obj.cell_jacobian(th).toarray() @ (ch.score_jacobian(th) @ Hp).T
    U = finite_influence(d, ch, lam, th)
    assert isinstance(U, Influence)
    st = U.source.stats
    np.testing.assert_allclose(U.dense(), U_ref, rtol=0, atol=1e-10 * np.abs(U_ref).max())
    for cov in NO_RECORD_COVS:
        C, C_ref = U.covariance(d, cov), dense_cov(U_ref, st, d, cov)
        np.testing.assert_allclose(C, C_ref, rtol=1e-10, atol=1e-10 * np.abs(C_ref).max(), err_msg=cov)
    C, C_ref = U.covariance(d, "record"), record_cov(U_ref, st, d)
    np.testing.assert_allclose(C, C_ref, rtol=1e-10, atol=1e-10 * np.abs(C_ref).max())


def test_sparse_endpoint_influence_equals_dense_reference(small):
    d = small
    U, _ = staged_influence(d, staged_fit(d, 1, "W"))
    U_ref, st = U.dense(), U.source.stats
    for cov in COV_TYPES:
        C = U.covariance(d, cov)
        C_ref = record_cov(U_ref, st, d) if cov == "record" else dense_cov(U_ref, st, d, cov)
        np.testing.assert_allclose(C, C_ref, rtol=1e-10, atol=1e-10 * np.abs(C_ref).max(), err_msg=cov)


def test_block_hessian_equals_dense_gram(small):
    d = small
    res = pydial.fit(d, "dial-anc")
    ch, th = res.chart, res.theta
    obj = Objective.weighted(ch, d, 3.0 * d.n_llm / d.n_human)
    c = obj.cells
    eta, v = obj.eta(th), obj._columns(ch.to_full(th))
    p = expit(eta)
    curv = c.w * c.n * p * (1 - p)
    J = obj.full_jacobian(th).toarray()
    ref = (J.T * curv) @ J
    np.testing.assert_allclose(obj._outer(curv, v), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


# ----------------------------------------------------------------- design
def random_design(rng, N, m, both_orders):
    i = rng.integers(0, N - 1, m)
    j = np.minimum(i + 1 + rng.integers(0, N - 1, m), N - 1)
    a = rng.choice([-1, 1], m)
    key = np.unique(((i * N + j) * 2 + (a > 0)) if both_orders else (i * N + j) * 2 + (((i + j) % 2) > 0))
    a = np.where(key % 2 == 1, 1, -1)
    rest = key // 2
    return rest // N, rest % N, a


@pytest.mark.parametrize("seed", range(12))
def test_fast_cycle_scan_decides_as_union_find(seed):
    rng = np.random.default_rng(seed)
    N = int(rng.integers(4, 12))
    ii, jj, aa = random_design(rng, N, int(rng.integers(3, 3 * N)), both_orders=seed % 3 == 0)
    s1, s2 = scan_cycles(N, ii, jj, aa), scan_cycles_fast(N, ii, jj, aa)
    assert s1.n_components == s2.n_components
    assert (s1.cycle is None) == (s2.cycle is None)
    if s2.cycle is not None:  # the witness is a genuine cycle with the reported signed order sum
        cyc = s2.cycle + [s2.cycle[0]]
        edges = {}
        for x, y, a in zip(ii, jj, aa):
            edges.setdefault((int(x), int(y)), set()).add(int(a))
        total = 0
        if s2.two_orders:
            assert edges[tuple(sorted(s2.cycle))] == {-1, 1}
        else:
            for u, w in zip(cyc[:-1], cyc[1:]):
                a = next(iter(edges[(min(u, w), max(u, w))]))
                total += a if u < w else -a
            assert abs(total) == abs(s2.cycle_sum) > 0


@pytest.mark.parametrize("seed", range(30))
def test_graph_separation_test_agrees_with_linear_program(seed):
    rng = np.random.default_rng(100 + seed)
    N = int(rng.integers(3, 7))
    ii, jj, aa = random_design(rng, N, int(rng.integers(N, 4 * N)), both_orders=True)
    n = rng.integers(1, 4, ii.size).astype(float)
    y = rng.binomial(n.astype(int), 0.5).astype(float)
    items = [f"m{t}" for t in range(N)]
    for nopos in (False, True):
        if no_separation_by_graph(N, ii, jj, aa, n, y, nopos):  # sufficient: the LP must agree
            ok, _ = check_separation(items, ii, jj, aa, n, y, nopos)
            assert ok


# ----------------------------------------------------------------- counts
@pytest.fixture(scope="module")
def rows_and_counts():
    sim = pydial.simulate(N=8, K=3, rank=1, n_llm=8000, n_human=600, seed=11)
    f = sim.frame.copy()
    f.loc[f.index[::37], "winner"] = "tie"
    f.loc[f.index[5::53], "winner"] = "both_bad"
    rows = Comparisons.from_frame(f, items=list(sim.truth.items))
    g = f.assign(wins_a=f.winner.eq("a").astype(int), wins_b=f.winner.eq("b").astype(int),
                 ties=f.winner.eq("tie").astype(int), both_bad=f.winner.eq("both_bad").astype(int))
    g.loc[g.judge == "human", "first"] = ""
    cnt = g.groupby(["judge", "item_a", "item_b", "first"], as_index=False)[["wins_a", "wins_b", "ties", "both_bad"]].sum()
    # split every key in two rows (repeated keys are summed) and flip half the orientations
    half = cnt.copy()
    half[["wins_a", "wins_b", "ties", "both_bad"]] //= 2
    rest = cnt.copy()
    rest[["wins_a", "wins_b", "ties", "both_bad"]] -= half[["wins_a", "wins_b", "ties", "both_bad"]]
    flip = rest.iloc[::2].copy()
    flip[["item_a", "item_b"]] = flip[["item_b", "item_a"]].to_numpy()
    flip[["wins_a", "wins_b"]] = flip[["wins_b", "wins_a"]].to_numpy()
    flip["first"] = flip["first"].map({"a": "b", "b": "a", "": ""})
    table = pd.concat([half, rest.iloc[1::2], flip], ignore_index=True)
    return rows, Comparisons.from_counts(table, items=list(sim.truth.items))


def test_counts_give_the_same_cells_and_summary(rows_and_counts):
    rows, cnt = rows_and_counts
    assert cnt.aggregated and cnt.rows is None and cnt.record_ids == ()
    for a, b in ((rows.llm, cnt.llm), (rows.human, cnt.human)):
        for f in dataclasses.fields(a):
            np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name))
    s1, s2 = rows.summary()["value"], cnt.summary()["value"]
    for key in s1.index.drop("records"):
        assert s1[key] == s2[key], key
    pd.testing.assert_frame_equal(rows.tie_cells(human=True), cnt.tie_cells(human=True))


@pytest.mark.parametrize("method", ["dial-ada", "dial-anc", "human", "judges", "pooled"])
def test_fit_on_counts_equals_fit_on_rows(rows_and_counts, method):
    rows, cnt = rows_and_counts
    for cov in NO_RECORD_COVS:
        a, b = pydial.fit(rows, method, cov_type=cov), pydial.fit(cnt, method, cov_type=cov)
        pd.testing.assert_frame_equal(a.scores, b.scores, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.cov.to_numpy(), b.cov.to_numpy(), rtol=1e-9, atol=1e-14)


def test_record_covariance_needs_record_ids(rows_and_counts):
    rows, cnt = rows_and_counts
    pydial.fit(rows, "dial-anc", cov_type="record")
    with pytest.raises(pydial.DataError, match="record"):
        pydial.fit(cnt, "dial-anc", cov_type="record")
    with pytest.raises(pydial.DataError, match="record"):
        cnt.split(0.5)


def test_bad_counts_are_named():
    base = pd.DataFrame({"judge": ["g", "g", "human"], "item_a": ["x", "y", "x"], "item_b": ["y", "x", "y"],
                         "first": ["a", "b", ""], "wins_a": [3, 1, 2], "wins_b": [1, 2, 1], "ties": [0, 0, 0]})
    Comparisons.from_counts(base)
    bad = base.assign(wins_b=[1, -2, 1])
    with pytest.raises(pydial.DataError, match=r"wins_b.*rows \[1\]"):
        Comparisons.from_counts(bad)
    with pytest.raises(pydial.DataError, match=r"wins_a.*below 2\*\*53.*rows \[2\]"):  # an int64 column's own check
        Comparisons.from_counts(base.assign(wins_a=np.array([3, 1, 2**60], np.int64)))
    with pytest.raises(pydial.DataError, match=r"display-order.*rows \[0\]"):
        Comparisons.from_counts(base.assign(first=["", "b", ""]))
    with pytest.raises(pydial.DataError, match="missing column"):
        Comparisons.from_counts(base.drop(columns="ties"))


# ------------------------------------------------------------ chunked reader
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_chunked_reader_gives_the_cells_of_from_frame(tmp_path, suffix):
    sim = pydial.simulate(N=6, K=2, rank=1, n_llm=3000, n_human=200, seed=3)
    f = sim.frame.copy()
    f.loc[f.index[::41], "winner"] = "tie"
    path = tmp_path / f"data{suffix}"
    if suffix == ".parquet":
        f.to_parquet(path)
    else:
        f.to_csv(path, index=False)
    got = pydial.read_comparisons(path, chunksize=700)
    ref = Comparisons.from_frame(f)
    assert got.items == ref.items and got.judges == ref.judges
    for a, b in ((ref.llm, got.llm), (ref.human, got.human)):
        for fld in dataclasses.fields(a):
            np.testing.assert_array_equal(getattr(a, fld.name), getattr(b, fld.name))
    assert got.summary().loc["LLM ties", "value"] == ref.summary().loc["LLM ties", "value"]


def test_chunked_reader_names_bad_rows(tmp_path):
    f = pydial.simulate(N=4, K=2, rank=1, n_llm=50, n_human=10, seed=3).frame
    f.loc[33, "winner"] = "draw"
    path = tmp_path / "bad.csv"
    f.to_csv(path, index=False)
    with pytest.raises(pydial.DataError, match=r"winner.*'draw'.*rows \[33\]"):
        pydial.read_comparisons(path, chunksize=20)


def test_replaced_data_do_not_share_the_cache(small):
    pydial.fit(small, "dial-anc")
    assert any(k[0] == "llm_only_fit" for k in entries(small))
    other = dataclasses.replace(small, llm=dataclasses.replace(small.llm, y=small.llm.n - small.llm.y))
    assert entries(other) == ()


def test_the_data_hold_no_objects_of_the_layers_above(small):
    """What fits derive from a data set lives in pydial.cache, and goes with the data set."""
    import gc

    from pydial import cache

    data = dataclasses.replace(small)
    pydial.fit(data, "dial-ada")
    held = [v for v in data.__dict__.values() if isinstance(v, dict)]
    layers_above = ("pydial.model", "pydial.inference", "pydial.estimation", "pydial.stan")
    assert not [type(x).__module__ for d in held for x in d.values() if type(x).__module__.startswith(layers_above)]
    kept = set(entries(data))
    assert {"llm_only_fit", "check_design", "stacked cells"} <= {k[0] for k in kept}
    ident = id(data)
    del data
    gc.collect()
    assert ident not in cache._STORE


def test_a_fit_that_cannot_fit_in_memory_raises_before_allocating(small, monkeypatch):
    from pydial import resources

    need = resources.fit_bytes(len(small.llm) + len(small.human), 2 * (small.K + small.N + 1) + small.K)
    monkeypatch.setattr(resources, "available_bytes", lambda: need - 1)
    with pytest.raises(pydial.MemoryLimitError, match="GB"):
        pydial.fit(small, "dial-ada")
    monkeypatch.setattr(resources, "available_bytes", lambda: need + 1)
    pydial.fit(small, "dial-anc")


def test_readme_dask_aggregation_gives_the_cells_of_the_rows(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    sim = pydial.simulate(N=6, K=2, rank=1, n_llm=3000, n_human=300, seed=8)
    f = sim.frame.copy()
    f.loc[f.index[::29], "winner"] = "tie"
    (tmp_path / "logs").mkdir()
    for t, lo in enumerate(range(0, len(f), 1200)):
        f.iloc[lo:lo + 1200].to_parquet(tmp_path / "logs" / f"part{t}.parquet")
    df = dd.read_parquet(str(tmp_path / "logs" / "*.parquet"), columns=["judge", "item_a", "item_b", "first", "winner"])
    df = df.assign(wins_a=(df.winner == "a").astype("int64"), wins_b=(df.winner == "b").astype("int64"),
                   ties=(df.winner == "tie").astype("int64"), both_bad=(df.winner == "both_bad").astype("int64"))
    df["first"] = df["first"].where(df.judge != "human", "")
    counts = (df.groupby(["judge", "item_a", "item_b", "first"])[["wins_a", "wins_b", "ties", "both_bad"]]
              .sum().reset_index().compute())
    got, ref = Comparisons.from_counts(counts), Comparisons.from_frame(f)
    for a, b in ((ref.llm, got.llm), (ref.human, got.human)):
        for fld in dataclasses.fields(a):
            np.testing.assert_array_equal(getattr(a, fld.name), getattr(b, fld.name))


def _faults_of_a_fresh_array(mb: int = 64) -> int:
    """Page faults of writing a new ``mb`` MB array (a fresh mapping from the system, or a reused heap block)."""
    import resource

    a = np.empty(mb << 17)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a.fill(1.0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(pydial.resources._glibc() is None, reason="glibc's allocator only")
def test_a_large_fit_reuses_the_memory_it_frees():
    """Inside reused_memory (fits of REUSE_CELLS cells or more) a freed 64 MB block is reused: writing the next one
    faults no page; outside, below REUSE_CELLS and after the last nested fit ends, each takes fresh pages (at least one
    2 MB huge page per 4 MB)."""
    from pydial.resources import REUSE_CELLS, reused_memory

    fresh = 64 // 4
    _faults_of_a_fresh_array()
    assert _faults_of_a_fresh_array() >= fresh
    with reused_memory(REUSE_CELLS - 1):
        _faults_of_a_fresh_array()
        assert _faults_of_a_fresh_array() >= fresh
    with reused_memory(REUSE_CELLS):
        _faults_of_a_fresh_array()
        assert _faults_of_a_fresh_array() <= 2
        with reused_memory(REUSE_CELLS):
            pass
        assert _faults_of_a_fresh_array() <= 2  # an inner fit's end keeps the outer one's setting
    assert _faults_of_a_fresh_array() >= fresh
