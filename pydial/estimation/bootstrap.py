r"""Record bootstrap of a whole fitting procedure (post-selection intervals).

:func:`bootstrap` refits the entire procedure (structured fit, weight path, GACV selection, penalty) on ``B``
resamples of the records, so the spread includes the selection step (Efron 2014).  Records are resampled with
replacement within two strata, with and without human labels, so every resample has the same human budget.
Intervals: percentile ``[q*_{alpha/2}, q*_{1-alpha/2}]`` and basic ``[2 theta - q*_{1-alpha/2}, 2 theta - q*_{alpha/2}]``.
Replicates use ``SeedSequence(seed).spawn(B)``: the result does not depend on ``n_jobs`` or the backend.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from pydial.data.comparisons import COVARIATE_PREFIX, Comparisons
from pydial.exceptions import (ArgumentError, BootstrapWarning, DataError, DialError, UnknownNameError,
                               caller_stacklevel)
from pydial.resources import check_bytes, check_choice, check_count, check_level, check_n_jobs, check_seed

BYTES_PER_REPLICATE = 2_000  # per replicate: its seed sequence, result record and the selection row
BYTES_PER_DRAW = 48  # per replicate and contrast: the draws, their differences and nanquantile's sorted copy


@dataclass
class BootstrapResult:
    """Output of :func:`bootstrap` (and :meth:`pydial.DialResult.bootstrap`).

    Attributes
    ----------
    scores, contrasts : DataFrame
        Indexed by item (``scores``) or by ``(item_i, item_j)`` with ``i < j`` (``contrasts``, ``s_i - s_j``):
        ``estimate`` (the original fit), ``boot_mean``, ``boot_se``, ``pct_low, pct_high`` (percentile) and
        ``basic_low, basic_high`` (basic) intervals.
    position_effects : DataFrame or None
        The same columns for the judge order effects ``b_k`` (LLM-only fit).
    covariate_effects : DataFrame or None
        The same columns for the covariate effects ``beta``, indexed as :attr:`pydial.DialResult.covariate_effects`;
        a replicate whose fit has no such row (``lambda = 0`` has ``beta_H`` alone) leaves it out.
    selection : DataFrame
        One row per successful replicate: ``lambda``, ``multiple`` (``lambda n_H / n_L``; NaN for
        ``judges``), ``rank`` (``None`` for a method without one), ``converged``.
    B, n_failed, level, by, seed : int, int, float, str, int or None
        Requested replicates and those whose refit raised (excluded); the interval level, resampling unit, root seed.
    draws : dict of ndarray
        Raw bootstrap estimates: ``scores`` (B_ok x N), ``b`` (B_ok x K) and ``beta`` when present.
    """

    scores: pd.DataFrame
    contrasts: pd.DataFrame
    position_effects: pd.DataFrame | None
    selection: pd.DataFrame
    B: int
    n_failed: int
    level: float
    by: str
    seed: int | None
    draws: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    covariate_effects: pd.DataFrame | None = None

    def lambda_distribution(self) -> pd.DataFrame:
        """Frequency of each selected ``(rank, multiple)`` over the replicates (``None`` / NaN for a method without)."""
        sel = self.selection
        out = sel.groupby(["rank", "multiple"], dropna=False).size().rename("count").reset_index()
        out["share"] = out["count"] / len(sel)
        return out

    def contrast(self, item_i: str, item_j: str) -> pd.Series:
        """Bootstrap intervals of ``s_i - s_j`` (either orientation).

        Raises
        ------
        UnknownNameError
            ``item_i`` or ``item_j`` is not an item of the fit (the message lists the items).
        ArgumentError
            ``item_i`` and ``item_j`` are the same item.
        """
        for argument, it in (("item_i", item_i), ("item_j", item_j)):
            UnknownNameError.check(argument, "item", [it], self.scores.index)
        if item_i == item_j:
            raise ArgumentError(f"item_i and item_j are both {item_i!r}: a contrast compares two different items")
        c = self.contrasts
        if (item_i, item_j) in c.index:
            return c.loc[(item_i, item_j)]
        row = c.loc[(item_j, item_i)].copy()  # the table holds every pair of items in one orientation
        row[["estimate", "boot_mean"]] *= -1
        row["pct_low"], row["pct_high"] = -row["pct_high"], -row["pct_low"]
        row["basic_low"], row["basic_high"] = -row["basic_high"], -row["basic_low"]
        return row

    def __repr__(self) -> str:
        """Show the number of replicates, failures, strata and the level."""
        return (f"BootstrapResult(B={self.B}, ok={len(self.selection)}, n_failed={self.n_failed}, by={self.by!r}, "
                f"level={self.level})")


# ------------------------------------------------------------- resampling
def record_strata(data: Comparisons) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Row positions of every record in ``data.frame`` (``order``, ``offsets``) and the human / LLM-only strata of records."""
    rec = data.frame["rec"].to_numpy()
    order = np.argsort(rec, kind="stable")
    counts = np.bincount(rec, minlength=len(data.record_ids))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    human = np.zeros(len(data.record_ids), bool)
    human[rec[(data.frame["k"] == data.K).to_numpy()]] = True
    return order, offsets, [np.flatnonzero(human), np.flatnonzero(~human)]


def resample_records(data: Comparisons, rng: np.random.Generator,
                     strata: tuple[np.ndarray, np.ndarray, list[np.ndarray]] | None = None) -> Comparisons:
    """Draw a record bootstrap sample of ``data`` within the strata (a record drawn twice is two; covariates on its scale)."""
    order, offsets, groups = strata if strata is not None else record_strata(data)
    drawn = np.concatenate([rng.choice(g, g.size, replace=True) for g in groups if g.size])
    sizes = offsets[drawn + 1] - offsets[drawn]
    starts = np.repeat(offsets[drawn], sizes)
    within = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows = order[starts + within]
    cols = ["record_id", "judge", "i", "j", "a", "outcome", "self", *(COVARIATE_PREFIX + c for c in data.covariates)]
    canon = data.frame.iloc[rows][cols].copy()
    canon["record_id"] = np.repeat(np.arange(drawn.size), sizes)  # copies are distinct records
    judges = tuple(k for k in data.judges if k in set(canon["judge"]))
    # the covariates keep the data's scale: every replicate's beta is per the same unit
    return Comparisons._build(canon, data.items, judges, data.human_judge,
                              covariates=(data.covariate_scale, data.covariate_transform),
                              self_preference=data.self_preference)


def _replicate(fit: Callable[..., Any], data: Comparisons, spec: Any,
               seeds: list[np.random.SeedSequence], strata: Any) -> list[dict[str, Any] | str]:
    """Refit ``fit(resample, spec=spec)`` (the result's own fitter, :func:`pydial.fit`) for each seed (one chunk)."""
    out: list[dict[str, Any] | str] = []
    for ss in seeds:
        boot = resample_records(data, np.random.default_rng(ss), strata)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = fit(boot, spec=spec)
        except (DialError, np.linalg.LinAlgError, FloatingPointError) as e:
            out.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
            continue
        s = res.scores["score"].reindex(list(data.items)).to_numpy(float)
        b = res.position_effects["b"] if res.position_effects is not None else None
        lam = float(res.lambda_)
        mult = lam if lam == 0 or np.isinf(lam) else lam * res.n_human / res.n_llm  # the family's n_H / n_L
        beta = res.covariate_effects["beta"] if res.covariate_effects is not None else None
        out.append({"s": s, "b": b, "beta": beta, "lambda": lam, "multiple": mult, "rank": res.rank,
                    "converged": bool(res.converged)})
    return out


def _interval_table(est: np.ndarray, draws: np.ndarray, index: pd.Index, level: float) -> pd.DataFrame:
    """Bootstrap mean, standard error and intervals of ``draws`` (replicates x quantities); NaN below two replicates."""
    alpha = 1.0 - level
    if draws.shape[0] < 2:
        lo = hi = mean = se = np.full(len(est), np.nan)
    else:
        lo, hi = np.nanquantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)
        mean, se = np.nanmean(draws, axis=0), np.nanstd(draws, axis=0, ddof=1)
    return pd.DataFrame({"estimate": est, "boot_mean": mean, "boot_se": se, "pct_low": lo, "pct_high": hi,
                         "basic_low": 2 * est - hi, "basic_high": 2 * est - lo}, index=index)


def _dask_client_active() -> bool:
    try:
        from distributed import get_client

        get_client()
        return True
    except (ImportError, ValueError):
        return False


def bootstrap(result: Any, B: int = 200, *, by: str = "record", seed: int | None = None, n_jobs: int = 1,
              level: float | None = None, progress: bool | None = None) -> BootstrapResult:
    """Record bootstrap of the whole procedure that produced ``result``.

    Parameters
    ----------
    result : DialResult
        A fit from :func:`pydial.fit` (it remembers its data and arguments).
    B : int, default 200
        Bootstrap replicates.
    by : {"record"}
        Resampling unit (see ``help(pydial.estimation.bootstrap)``).
    seed : int, optional
        Root seed of ``SeedSequence(seed).spawn(B)``.
    n_jobs : int, default 1
        joblib workers (``-1``: all cores); an active ``distributed.Client`` runs them on its cluster instead.
    level : float, optional
        Interval level (default: the fit's).
    progress : bool, optional
        Progress bar (tqdm); default on only when stderr is a terminal.

    Returns
    -------
    BootstrapResult

    Raises
    ------
    ArgumentError
        An invalid ``B``, ``by``, ``seed``, ``n_jobs`` or ``level``, or ``method="atc"`` (no covariance to compare with).
    DataError
        The data carry no record ids (built from aggregated counts).
    MemoryLimitError
        The ``B`` replicates' draws would not fit in memory (checked before any refit).

    Warns
    -----
    BootstrapWarning
        Every stratum (human-labelled / LLM-only records) holds at most one record, so the standard
        errors and intervals are NaN, not 0; or one holds a single record, whose variability is left out.

    Notes
    -----
    Use the percentile / basic intervals when the selected ``lambda`` (or ``r``) varies across replicates
    (:meth:`BootstrapResult.lambda_distribution`): the sandwich, conditional on the selection, can under-cover.
    Each replicate costs one full fit.
    """
    from joblib import Parallel, delayed, parallel_config
    from tqdm.auto import tqdm

    check_choice("by", by, ("record",))
    B = check_count(B, "B", minimum=2)
    seed = check_seed(seed)
    n_jobs = check_n_jobs(n_jobs)
    level = result.level if level is None else check_level(level)
    if result.spec.method == "atc":
        raise ArgumentError("bootstrap is not available for method='atc' (AtC's scores have no covariance to "
                            "bootstrap beside); bootstrap a fit of 'dial-anc' or 'dial-ada' instead")
    data, spec = result.data, result.spec.replace(check=False)
    if data.aggregated:
        raise DataError(f"bootstrap(by={by!r}) resamples records, but these data were built from aggregated counts "
                        "and carry no record ids; fit data with record ids (Comparisons.from_frame / from_csv)")
    N, K = len(result.items), len(result.judges)
    n_beta = 0 if result.covariate_effects is None else len(result.covariate_effects)
    per = BYTES_PER_REPLICATE + BYTES_PER_DRAW * (N * (N - 1) // 2 + N + K + n_beta)
    check_bytes(B * per, f"bootstrap(B={B:,})", "reduce B (a few hundred replicates suffice for intervals)",
                detail=f"{B:,} replicates x {per:,} B")
    strata = record_strata(data)
    if all(g.size <= 1 for g in strata[2]):  # every resample is the data
        warnings.warn(f"bootstrap(by={by!r}): the data hold {len(data.record_ids)} record(s) and no stratum "
                      "(human-labelled / LLM-only records) has two, so every resample is the data itself; the "
                      "bootstrap standard errors and intervals are NaN (not 0). Use the fit's sandwich intervals, "
                      "or data with more records", BootstrapWarning, stacklevel=caller_stacklevel())
        return _result_from(result, [], B, 0, level, by, seed)
    single = [f"the {name} records are a single record" for name, g in zip(("human-labelled", "LLM-only"), strata[2])
              if g.size == 1]
    if single:
        warnings.warn(f"bootstrap(by={by!r}): {' and '.join(single)}, identical in every resample: the "
                      "intervals leave out its sampling variability", BootstrapWarning,
                      stacklevel=caller_stacklevel())
    seeds = np.random.SeedSequence(seed).spawn(B)
    dask = _dask_client_active()
    workers = max(1, n_jobs if n_jobs > 0 else 2)
    size = max(1, int(np.ceil(B / (4 * workers)))) if (n_jobs != 1 or dask) else 1
    chunks = [seeds[t: t + size] for t in range(0, B, size)]
    show = sys.stderr.isatty() if progress is None else bool(progress)
    with parallel_config(backend="dask") if dask else parallel_config(n_jobs=n_jobs):
        gen = Parallel(return_as="generator")(delayed(_replicate)(result.fitter, data, spec, ch, strata) for ch in chunks)
        reps: list[dict[str, Any] | str] = []
        with tqdm(total=B, desc="bootstrap", disable=not show, mininterval=1.0) as bar:
            for part in gen:
                reps += part
                bar.update(len(part))
    ok = [r for r in reps if isinstance(r, dict)]
    if len(ok) < 2:
        raise DialError(f"only {len(ok)} of {B} bootstrap refits succeeded: "
                        + "; ".join(sorted({r for r in reps if isinstance(r, str)}))[:500])
    return _result_from(result, ok, B, len(reps) - len(ok), level, by, seed)


def _result_from(result: Any, ok: list[dict[str, Any]], B: int, n_failed: int, level: float, by: str,
                 seed: int | None) -> BootstrapResult:
    """Assemble the :class:`BootstrapResult` of the successful replicates ``ok`` (none: NaN spreads)."""
    items = list(result.items)
    S = np.array([r["s"] for r in ok]).reshape(len(ok), len(items))
    s_hat = result.scores["score"].reindex(items).to_numpy(float)
    scores = _interval_table(s_hat, S, pd.Index(items, name="item"), level)
    iu, ju = np.triu_indices(len(items), 1)
    pairs = pd.MultiIndex.from_arrays([[items[t] for t in iu], [items[t] for t in ju]], names=["item_i", "item_j"])
    contrasts = _interval_table(s_hat[iu] - s_hat[ju], S[:, iu] - S[:, ju], pairs, level)
    draws, tables = {"scores": S}, {}
    for key, frame in (("b", result.position_effects), ("beta", result.covariate_effects)):
        if frame is not None and all(r[key] is not None for r in ok):  # indexed by judge, or (judge, covariate)
            draws[key] = np.array([r[key].reindex(frame.index).to_numpy(float) for r in ok]).reshape(len(ok), len(frame))
            tables[key] = _interval_table(frame[key].to_numpy(float), draws[key], frame.index, level)
    selection = pd.DataFrame({k: [r[k] for r in ok] for k in ("lambda", "multiple", "rank", "converged")})
    selection.index.name = "replicate"
    return BootstrapResult(scores=scores, contrasts=contrasts, position_effects=tables.get("b"), selection=selection,
                           B=int(B), n_failed=n_failed, level=level, by=by, seed=seed, draws=draws,
                           covariate_effects=tables.get("beta"))
