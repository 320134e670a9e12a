"""Pairwise judgment data (:class:`Comparisons`): validation, canonical orientation and cell aggregation.

The input is a long table ``record_id, judge, item_a, item_b, first, winner``, one row per judgment (the human
judge's rows are the human labels).  Pairs are stored as ``i < j`` with ``a = +1`` when item ``i`` was shown first,
``-1`` otherwise (paper, Sec. 3.1).  Decisive judgments become LLM cells ``(k, i, j, a, n, y)`` (eq.
binomial-model-llm) and human cells ``(i, j, n, y)`` (eq. binomial-model-human); ties, "both bad" labels and
self-comparisons are left out of the binary models and counted by :meth:`Comparisons.summary`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from pydial.cache import derived
from pydial.data import construction
from pydial.data.cells import BOTH_BAD, I_WINS, J_WINS, TIE, CellTable, HumanCells, LLMCells, RecordIds, Rows, as_int64
from pydial.data.construction import COVARIATE_PREFIX, NAMES_CHANGED, SELF_PREFERENCE
from pydial.data.ingest import Keys, RowCoder, group
from pydial.data.names import argument_name, own_items
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError
from pydial.resources import check_choice, check_level

__all__ = ["Comparisons", "require_comparisons"]


def require_comparisons(data: Any, argument: str = "data") -> "Comparisons":
    """Return ``data`` if it is a :class:`Comparisons`, else raise :class:`~pydial.ArgumentTypeError` naming ``argument``.

    The message says how to build one (from a DataFrame, or a simulation's ``.comparisons``).
    """
    if not isinstance(data, Comparisons):
        hint = ("; build it from the long table with pydial.Comparisons.from_frame(df)" if isinstance(data, pd.DataFrame)
                else "; pass the simulation's .comparisons" if hasattr(data, "comparisons") and hasattr(data, "truth")
                else " (e.g. pydial.Comparisons.from_frame(df) or pydial.Comparisons.from_csv(path))")
        raise ArgumentTypeError(f"{argument} must be a pydial.Comparisons, got {type(data).__name__}{hint}")
    return data


@dataclass(frozen=True)
class Comparisons:
    """Validated pairwise judgments of LLM judges and (optionally) people.

    Build with :meth:`from_frame` or :meth:`from_csv`.

    Attributes
    ----------
    items : tuple of str
        Item names; position is the item index (``N = len(items)``).
    judges : tuple of str
        LLM judge names; position is the judge index ``k`` (``K = len(judges)``).
    human_judge : str
        The judge name whose rows are the human labels.
    llm : LLMCells
        Decisive LLM judgments aggregated by ``(k, i, j, a)``.
    human : HumanCells
        Decisive human judgments aggregated by ``(i, j)``.
    rows : Rows or None
        Decisive judgments one by one (LLM rows first); ``None`` for aggregated input (no record ids).
    record_ids : RecordIds or tuple
        Distinct record ids (:class:`RecordIds`) that ``rows.record`` indexes; an empty tuple for aggregated input.
    frame : pandas.DataFrame
        All validated rows in canonical coding (columns ``record_id, judge, i, j, a, outcome, self``), the
        excluded ones included; for aggregated input one row per ``(judge, i, j, a, outcome)`` with its ``count``.
    """

    items: tuple[str, ...]
    judges: tuple[str, ...]
    human_judge: str
    llm: LLMCells
    human: HumanCells
    rows: Rows | None
    record_ids: Sequence[Any]
    frame: pd.DataFrame = field(repr=False)
    covariate_scale: pd.Series | None = field(default=None, repr=False)
    """Root mean square (standard deviation about 0) of each comparison covariate (a Series by name); None without."""
    covariate_transform: str | None = field(default=None, repr=False)
    """``"difference"`` or ``"normalized"`` (:mod:`pydial.data.features`), ``None`` without covariates."""
    self_preference: Mapping[str, tuple[str, ...]] | None = field(default=None, repr=False)
    """The own items of each judge of the self-preference covariate (:meth:`with_self_preference`); None without."""

    # ------------------------------------------------------------------ build
    from_frame = classmethod(construction.from_frame)
    from_counts = classmethod(construction.from_counts)
    from_coded = classmethod(construction.from_coded)
    from_csv = classmethod(construction.from_csv)
    from_parquet = classmethod(construction.from_parquet)

    @classmethod
    def _build(cls, canon: pd.DataFrame, items: tuple[str, ...], judges: tuple[str, ...] | None, human_judge: str,
               dropped: tuple[str, ...] = (), records: tuple[np.ndarray, pd.Index] | None = None,
               covariates: tuple[pd.Series | None, str | None] = (None, None),
               self_preference: Mapping[str, tuple[str, ...]] | None = None,
               drop_empty_judges: bool = False) -> "Comparisons":
        """Aggregate the canonical rows ``canon`` of the ``judges`` (``None``: those with a decisive judgment) into cells.

        ``records``: the rows' record codes and distinct ids; ``covariates``: scales and transform of the ``cov:<name>``
        columns (each distinct value is a cell of its own); ``self_preference``: the own items of the judges kept.
        """
        judge = canon["judge"].astype("category").cat
        codes, cats = judge.codes.to_numpy(), judge.categories
        outcome = canon["outcome"].to_numpy()
        decisive = ~canon["self"].to_numpy(bool) & ((outcome == I_WINS) | (outcome == J_WINS))
        if judges is None:
            llm_rows = codes != cats.get_indexer([human_judge])[0]
            seen = np.bincount(codes[llm_rows], minlength=len(cats)) > 0
            has = np.bincount(codes[decisive & llm_rows], minlength=len(cats)) > 0
            empty = sorted(cats[seen & ~has])
            if empty and not drop_empty_judges:
                raise DataError(f"judge(s) {empty} have no decisive judgment (all ties, 'both bad' or self-comparisons); "
                                "pass drop_empty_judges=True (--drop-empty-judges) to remove them (they are then counted "
                                "in summary())")
            judges, dropped = tuple(sorted(cats[has])), tuple(empty)
        K = len(judges)
        jindex = {name: k for k, name in enumerate(judges)}
        jindex[human_judge] = K
        k = np.asarray([jindex.get(str(x), -1) for x in cats] + [-1], dtype=np.int32)[codes]
        keep = k >= 0
        if not keep.all():
            canon, k, records, outcome, decisive = canon.loc[keep], k[keep], None, outcome[keep], decisive[keep]
        canon = canon.assign(k=k)
        canon.attrs["dropped_judges"] = dropped
        counted = "count" in canon.columns  # aggregated input: no record ids
        if not counted:
            rec_codes, rec_uniques = records if records is not None else pd.factorize(canon["record_id"], sort=False)
            canon["rec"] = rec_codes
        N = len(items)
        # One key (k, i, j, a[, z]) per row (exact at any size); the human judge (k = K, a = 0) sorts last.
        scale, transform = covariates
        zcols = [] if scale is None else [COVARIATE_PREFIX + c for c in scale.index]
        rc = RowCoder(canon[zcols].to_numpy(float)) if zcols else None
        keys = Keys((K + 1, N, N, 2, *(() if rc is None else (len(rc),))))
        key = keys.encode([k, canon["i"].to_numpy(), canon["j"].to_numpy(), canon["a"].to_numpy() > 0,
                           *(() if rc is None else (rc.codes,))])
        every = bool(decisive.all())
        won = outcome == I_WINS if every else outcome[decisive] == I_WINS
        cnt = None if not counted else canon["count"].to_numpy(float) if every else canon["count"].to_numpy(float)[decisive]
        if not every:
            key = key[decisive]
        uk, inv = group(key)
        del key
        n = np.bincount(inv, weights=cnt, minlength=uk.size).astype(float)
        y = np.bincount(inv, weights=won if cnt is None else won * cnt, minlength=uk.size).astype(float)
        ck, ci, cj, ca, *zc = keys.decode(uk)
        del uk
        n_llm = int(np.searchsorted(ck, K))
        z = None if rc is None else rc.table[zc[0]]

        # LLM cells keyed by (k, i, j, a[, z]), then human cells keyed by (i, j[, z]).
        llm = LLMCells(ck[:n_llm], ci[:n_llm], cj[:n_llm], np.where(ca[:n_llm] == 1, 1, -1), n[:n_llm], y[:n_llm],
                       z=None if z is None else z[:n_llm])
        human = HumanCells(ci[n_llm:], cj[n_llm:], n[n_llm:], y[n_llm:], z=None if z is None else z[n_llm:], judge=K)
        own = {k: tuple(v) for k, v in (self_preference or {}).items() if k in jindex and k != human_judge}  # judges kept
        extra: dict[str, Any] = {"covariate_scale": scale, "covariate_transform": transform, "self_preference": own or None}
        if counted:
            return cls(items, judges, human_judge, llm, human, None, (), canon, **extra)
        is_h = inv >= n_llm
        cell = inv  # index into the LLM or the human cells
        cell[is_h] -= n_llm
        take = None if every else np.flatnonzero(decisive)  # the decisive rows, LLM rows first, then human rows
        if is_h.any() and not is_h.all():
            order = np.concatenate([np.flatnonzero(~is_h), np.flatnonzero(is_h)])
            take, cell, won = order if take is None else take[order], cell[order], won[order]
        rec = np.asarray(rec_codes, dtype=np.int64)
        rows = Rows(rec if take is None else rec[take], (k if take is None else k[take]).astype(np.int64), cell,
                    won.astype(float))
        return cls(items, judges, human_judge, llm, human, rows, RecordIds(rec_uniques), canon, **extra)

    # -------------------------------------------------------------- properties
    @property
    def N(self) -> int:
        """Number of items."""
        return len(self.items)

    @property
    def K(self) -> int:
        """Number of LLM judges."""
        return len(self.judges)

    @property
    def covariates(self) -> tuple[str, ...]:
        """Names of the response covariates (empty without covariates)."""
        return () if self.covariate_scale is None else tuple(str(c) for c in self.covariate_scale.index)

    @property
    def p(self) -> int:
        """Number of response covariates."""
        return len(self.covariates)

    @property
    def _covariate_columns(self) -> list[str]:
        return [COVARIATE_PREFIX + c for c in self.covariates]

    @property
    def _canonical_columns(self) -> list[str]:
        """The columns of :attr:`frame` that :meth:`_build` aggregates."""
        return ["record_id", "judge", "i", "j", "a", "outcome", "self", *self._covariate_columns] + (
            ["count"] if self.aggregated else [])

    @property
    def covariate_support(self) -> np.ndarray:
        """``(K + 1, p)`` bool: whether covariate ``t`` is nonzero on some decisive cell of judge ``k`` (row ``K``: the people).

        Where it is not, the entry of ``beta`` is a fixed 0 (:class:`~pydial.model.chart.Chart`'s ``fixed``).  Cached.
        """
        def build() -> np.ndarray:
            out = np.zeros((self.K + 1, self.p), bool)
            for cells, g in ((self.llm, self.llm.judge), (self.human, np.full(len(self.human), self.K))):
                if cells.z is not None and len(cells):
                    for t in range(self.p):  # nonzero cells per group (bincount: linear, no ufunc.at)
                        out[:, t] |= np.bincount(g, weights=cells.z[:, t] != 0, minlength=self.K + 1) > 0
            return out

        return derived(self, ("covariate support",), build)

    def effect_columns(self, z: np.ndarray | None, group: int | None) -> np.ndarray | None:
        """Return the columns of ``z`` (cells x ``p``) whose effects ``group`` has (:attr:`covariate_support`), or ``None``.

        ``group``: a judge index, ``K`` for the people, ``None`` for the LLM judges together (a shared effect).
        """
        if z is None:
            return None
        sup = self.covariate_support
        keep = sup[:-1].any(axis=0) if group is None else sup[group]
        return z if keep.all() else (z[:, keep] if keep.any() else None)

    def with_self_preference(self, own: Mapping[str, Sequence[str]], *, strip_names: bool = True) -> "Comparisons":
        """Return the data with the self-preference covariate: a judge favouring its own model family's responses.

        Beyond the paper: the response covariate ``"self_preference"``, appended to :attr:`covariates`, from each
        judge's own items ``own`` (e.g. ``{"gpt-4": ["gpt-4-0613", "gpt-4-turbo"]}``): judge ``k``'s comparison of
        ``i < j`` has ``z = 1[i own_k] - 1[j own_k]``, 0 for the people and the judges not in ``own`` (their ``beta``
        fixed at 0, :attr:`covariate_support`).  Its scale is 1, so ``beta_k`` is the log-odds shift of an own item.
        Constant within a judge's pair (``z = D_k o_k``), it is confounded with the judge's scores in
        ``method="judges"`` and identified through the low-rank structure only in the structured models
        (:func:`pydial.model.identifiability.check_design`).  The names of ``own`` are cleaned as the data's are
        (:mod:`pydial.data.names`; ``strip_names`` as the data were read).

        Raises
        ------
        DataError
            A judge of ``own`` that is not an LLM judge of the data (the people included), an unknown item, or no
            judgment of a mapped judge comparing an own item with another.
        ArgumentError
            The data have a self-preference covariate already.
        ArgumentTypeError
            ``own`` is not a mapping, or a judge's entry is neither a name nor a list of names (e.g. ``None``).
        """
        if SELF_PREFERENCE in self.covariates:
            raise ArgumentError(f"the data have the covariate {SELF_PREFERENCE!r} already")

        mapped: dict[str, tuple[str, ...]] = {}
        for judge, given in own_items(own).items():
            key = argument_name(judge, "a judge of self_preference", strip_names)
            mapped[key] = tuple(dict.fromkeys(mapped.get(key, ()) + tuple(
                argument_name(x, f"self_preference[{judge!r}]", strip_names) for x in given)))
        unknown = sorted(k for k in mapped if k not in self.judges)
        if unknown:
            raise DataError(f"self_preference names judge(s) {unknown} that are not LLM judges of the data "
                            f"(people have no self-preference); known judges: {list(self.judges)}")
        index = {name: t for t, name in enumerate(self.items)}
        bad = sorted({x for v in mapped.values() for x in v if x not in index})
        if bad:
            raise DataError(f"self_preference names unknown item(s) {bad[:10]}; known items: {list(self.items)[:10]}"
                            + (" ..." if self.N > 10 else ""))
        O = np.zeros((self.K + 1, self.N))  # own-item indicators o_k, the people's row 0
        for k, v in mapped.items():
            O[self.judges.index(k), [index[x] for x in v]] = 1.0
        f = self.frame
        k, i, j = (f[c].to_numpy(np.int64) for c in ("k", "i", "j"))
        z = O[k, i] - O[k, j]
        if not np.any(z[(k < self.K) & ~f["self"].to_numpy(bool)] != 0):
            raise DataError(f"no judgment of the judge(s) {sorted(mapped)} compares an own item with another item: "
                            "the self-preference covariate is 0 everywhere")
        canon = f[self._canonical_columns].assign(**{COVARIATE_PREFIX + SELF_PREFERENCE: z})
        scale = pd.Series({**({} if self.covariate_scale is None else self.covariate_scale), SELF_PREFERENCE: 1.0},
                          name="scale", dtype=float).rename_axis("covariate")
        out = Comparisons._build(canon, self.items, self.judges, self.human_judge, tuple(f.attrs.get("dropped_judges", ())),
                                 covariates=(scale, self.covariate_transform or "difference"), self_preference=mapped)
        out.frame.attrs.update({key: val for key, val in f.attrs.items() if key not in out.frame.attrs})
        return out

    @property
    def aggregated(self) -> bool:
        """Whether the data came as aggregated counts (no record ids, no per-row table)."""
        return self.rows is None

    def _require_rows(self, what: str) -> None:
        if self.aggregated:
            raise DataError(f"{what} needs the judgments row by row with their record ids, but these data were "
                            "built from aggregated counts (Comparisons.from_counts / read_comparisons)")

    @property
    def n_llm(self) -> int:
        """Number of decisive LLM judgments ``n_L``."""
        return derived(self, ("n_llm",), lambda: int(self.llm.n.sum()))

    @property
    def n_human(self) -> int:
        """Number of decisive human judgments ``n_H``."""
        return derived(self, ("n_human",), lambda: int(self.human.n.sum()))

    def llm_cells(self) -> pd.DataFrame:
        """LLM cells as a labelled table: judge, item_i, item_j, a, n, y."""
        return self._labelled(self.llm, llm=True)

    def human_cells(self) -> pd.DataFrame:
        """Human cells as a labelled table: item_i, item_j, n, y."""
        return self._labelled(self.human, llm=False)

    def _labelled(self, cells: CellTable, llm: bool) -> pd.DataFrame:
        """Return ``cells`` with item (and for the LLM cells judge) names, then their covariate columns ``z_<name>``."""
        it = np.asarray(self.items, dtype=object)
        judge = {"judge": np.asarray(self.judges, dtype=object)[cells.judge]} if llm else {}
        z = {} if cells.z is None else {f"z_{c}": cells.z[:, t] for t, c in enumerate(self.covariates)}
        return pd.DataFrame({**judge, "item_i": it[cells.i], "item_j": it[cells.j], **({"a": cells.a} if llm else {}),
                             "n": cells.n.astype(int), "y": cells.y.astype(int), **z})

    def cell_table(self, which: str = "llm", *, with_ties: bool = False) -> CellTable:
        """Return a :class:`CellTable` of the cells of both engines, with integer counts.

        Parameters
        ----------
        which : {"llm", "human", "pooled"}
            The LLM cells (judges ``0..K-1``), the human cells (judge ``K``, ``a = 0``), or the LLM cells all
            given to judge 0 (the pooled BTL).
        with_ties : bool
            ``False``: the decisive cells (:attr:`llm`, :attr:`human`); ``True``: the cells with tie counts of
            :meth:`tie_cells`.
        """
        check_choice("which", which, ("llm", "human", "pooled"))

        def build() -> CellTable:
            if which == "pooled":
                return self.cell_table("llm", with_ties=with_ties).with_judge(0)
            if not with_ties:
                return self.human.integer().with_judge(self.K) if which == "human" else self.llm.integer()
            t = self._tie_frame()
            t = t[t["k"] == self.K] if which == "human" else t[t["k"] < self.K]
            z = t[self._covariate_columns].to_numpy(float) if self.p else None
            k, i, j, a, wi, wj, ti = (as_int64(t[c]) for c in ("k", "i", "j", "a", "wins_i", "wins_j", "ties"))
            return CellTable.from_counts(k, i, j, a, wi, wj, ti, z)

        return derived(self, ("cell_table", which, bool(with_ties)), build)

    def tie_cells(self, *, human: bool = False) -> pd.DataFrame:
        """Cells with tie counts for the tie models (Davidson / Davidson-Beaver), a new frame per call.

        Integer columns ``k, i, j, a, wins_i, wins_j, ties`` (the human judge, ``k = K`` and ``a = 0``, only with
        ``human=True``) sorted by ``(k, i, j, a)``, then the covariate columns ``cov:<name>`` (a cell per value).
        """
        t = self._tie_frame()
        return t.copy() if human else t.loc[t["k"] < self.K].reset_index(drop=True)

    def _tie_frame(self) -> pd.DataFrame:
        """Aggregate the cells with tie counts of every judge, people included (:meth:`tie_cells`), once."""
        def build() -> pd.DataFrame:
            f = self.frame
            g = f.loc[(~f["self"]) & f["outcome"].isin([I_WINS, J_WINS, TIE])]
            wt = g["count"] if self.aggregated else 1
            g = g.assign(**{c: (g["outcome"] == o).astype(int) * wt for c, o in (("wins_i", I_WINS), ("wins_j", J_WINS),
                                                                                 ("ties", TIE))})
            out = g.groupby(["k", "i", "j", "a", *self._covariate_columns], as_index=False)[["wins_i", "wins_j", "ties"]].sum()
            return out.astype({c: int for c in ("k", "i", "j", "a", "wins_i", "wins_j", "ties")}).reset_index(drop=True)

        return derived(self, ("tie_cells",), build)

    # ----------------------------------------------------------------- report
    def summary(self) -> pd.DataFrame:
        """Count the statistics of the paper's Table "Dataset statistics", plus exclusions: a DataFrame column ``value``.

        Data read by :func:`pydial.read_judge_responses` add rows ``panel: ...``: what the read left out.
        """
        f = self.frame
        K, N = self.K, self.N
        wt = f["count"] if self.aggregated else pd.Series(1, index=f.index)  # judgments per row
        llm = f["k"] != K
        hm = ~llm & ~f["self"]
        h_i, h_j = (int(wt[hm & (f["outcome"] == o)].sum()) for o in (I_WINS, J_WINS))
        cells_kij = pd.Series(self.llm.n).groupby([self.llm.judge, self.llm.i, self.llm.j]).sum()
        other = ~f["self"].to_numpy(bool)
        pairs_obs = len(pd.unique(f["i"].to_numpy(np.int64)[other] * N + f["j"].to_numpy(np.int64)[other]))
        lm = llm & ~f["self"]
        l_tie = wt.where(lm & (f["outcome"] == TIE), 0)
        ties_by_judge = l_tie[lm].groupby(f.loc[lm, "k"]).sum() / wt[lm].groupby(f.loc[lm, "k"]).sum()
        rows: dict[str, Any] = {
            "records": f["record_id"].nunique() if not self.aggregated else "- (aggregated counts)",
            "items N": N,
            "LLM judges K": K,
            "observed pairs": pairs_obs,
            "possible pairs": N * (N - 1) // 2,
            "human labels decisive (i wins / j wins)": f"{h_i} / {h_j}",
            "human ties": int(wt[hm & (f["outcome"] == TIE)].sum()),
            "human both bad": int(wt[hm & (f["outcome"] == BOTH_BAD)].sum()),
            "decisive human labels n_H": self.n_human,
            "LLM judgments": int(wt[llm].sum()),
            "LLM ties": int(l_tie.sum()),
            "LLM both bad": int(wt[lm & (f["outcome"] == BOTH_BAD)].sum()),
            "self-comparisons excluded": int(wt[f["self"]].sum()),
            "tie-excluded n_LLM": self.n_llm,
            "display order +1 / -1": f"{int(self.llm.n[self.llm.a > 0].sum())} / {int(self.llm.n[self.llm.a < 0].sum())}",
            "cells observed (judge, pair)": int(cells_kij.size),
            "cells possible (judge, pair)": K * N * (N - 1) // 2,
            "n_kij per cell min / mean / max":
                f"{cells_kij.min():.0f} / {cells_kij.mean():.1f} / {cells_kij.max():.0f}" if cells_kij.size else "-",
            "judge tie rate min-max": f"{ties_by_judge.min():.3f}-{ties_by_judge.max():.3f}" if ties_by_judge.size else "-",
            NAMES_CHANGED: f.attrs.get("names_stripped", "none"),
            "duplicated rows (identical in all six columns)": "{} ({})".format(*f.attrs.get("duplicated_rows", (0, "kept"))),
            "judges dropped (no decisive judgment)": ", ".join(f.attrs.get("dropped_judges", ())) or "none",
        }
        if self.p:
            rows["covariates (transform; scale)"] = f"{self.covariate_transform}; " + ", ".join(
                f"{c} {v:.4g}" for c, v in self.covariate_scale.items())  # type: ignore[union-attr]
        rows.update(f.attrs.get("panel", {}))  # what pydial.read_judge_responses read and left out
        return pd.DataFrame({"value": pd.Series(rows, dtype=object)})

    def __repr__(self) -> str:
        """Show the numbers of items, judges, judgments, cells and records."""
        return (f"Comparisons(N={self.N} items, K={self.K} LLM judges, n_LLM={self.n_llm} in {len(self.llm)} cells, "
                f"n_H={self.n_human} in {len(self.human)} cells, {len(self.record_ids)} records)")

    # ------------------------------------------------------------- subsetting
    def subset(self, *, records: Iterable[Any] | None = None, judges: Iterable[str] | None = None,
               drop_human: bool = False, drop_empty_judges: bool = False) -> "Comparisons":
        """Return a new :class:`Comparisons` restricted to some records and/or judges (items keep their order).

        Unknown record ids or judges raise :class:`DataError`; so does an LLM judge left with no decisive judgment,
        unless ``drop_empty_judges=True`` (it is then removed and counted in :meth:`summary`).
        """
        f = self.frame
        m = np.ones(len(f), dtype=bool)
        if records is not None:
            self._require_rows("subset(records=...)")
            wanted = pd.Index(list(records))
            missing = wanted.difference(pd.Index(self.record_ids))
            if len(missing):
                raise DataError(f"unknown record id(s) {list(missing[:5])} ({len(missing)} in all)")
            m &= f["record_id"].isin(wanted).to_numpy()
        keep = list(self.judges) if judges is None else [str(x) for x in judges]
        unknown = sorted(set(keep) - set(self.judges))
        if unknown:
            raise DataError(f"unknown judge(s) {unknown}; known: {list(self.judges)}")
        if drop_human:
            m &= (f["k"] < self.K).to_numpy()
        canon = f.loc[m, self._canonical_columns]
        decisive = canon.loc[(~canon["self"]) & canon["outcome"].isin([I_WINS, J_WINS]), "judge"]
        empty = [k for k in keep if k not in set(decisive)]
        if empty and not drop_empty_judges:
            raise DataError(f"judge(s) {empty} have no decisive judgment in this subset; "
                            "pass drop_empty_judges=True to remove them")
        keep = [k for k in keep if k not in empty]
        dropped = tuple(f.attrs.get("dropped_judges", ())) + tuple(empty)
        return Comparisons._build(canon, self.items, tuple(keep), self.human_judge, dropped,
                                  covariates=(self.covariate_scale, self.covariate_transform),
                                  self_preference=self.self_preference)

    def split(self, frac: float = 0.7, *, seed: np.random.Generator | int | None = None
              ) -> tuple["Comparisons", "Comparisons"]:
        """Random split by record: ``(train, test)`` with about ``frac`` of the records in ``train`` (drawn by ``seed``)."""
        self._require_rows("split (by record)")
        check_level(frac, "frac")
        ids = np.asarray(self.record_ids, dtype=object)
        take = np.random.default_rng(seed).permutation(ids.size)[: int(round(frac * ids.size))]
        train_ids = set(ids[take].tolist())
        test_ids = [r for r in self.record_ids if r not in train_ids]
        return self.subset(records=train_ids), self.subset(records=test_ids)

    def to_frame(self) -> pd.DataFrame:
        """Return the validated rows in the long format (canonical item names).

        With covariates, the per-side columns ``<name>_a``, ``<name>_b`` give each row's comparison covariate
        again (not the original values, which are not kept): ``(x, 0)`` with ``x = z * scale`` for the
        ``"difference"`` transform, ``((1 + x) / 2, (1 - x) / 2)`` for ``"normalized"``.  The self-preference
        covariate has no columns: ``from_frame(data.to_frame(), covariates=<the others>,
        self_preference=data.self_preference, covariate_transform=...)`` gives the same data.
        """
        self._require_rows("to_frame")
        f = self.frame
        it = np.asarray(self.items, dtype=object)
        winner = np.select([f["outcome"] == I_WINS, f["outcome"] == J_WINS, f["outcome"] == TIE], ["a", "b", "tie"], "both_bad")
        first = np.where(f["a"] < 0, "b", "a")
        out = {"record_id": f["record_id"].to_numpy(), "judge": f["judge"].to_numpy(),
               "item_a": it[f["i"]], "item_b": it[f["j"]], "first": first, "winner": winner}
        for c in self.covariates:
            if c == SELF_PREFERENCE and self.self_preference is not None:
                continue  # from the own items (self_preference=), not from per-side columns
            x = f[COVARIATE_PREFIX + c].to_numpy(float) * float(self.covariate_scale[c])  # type: ignore[index]
            normalized = self.covariate_transform == "normalized"
            out[f"{c}_a"], out[f"{c}_b"] = ((1 + x) / 2, (1 - x) / 2) if normalized else (x, np.zeros_like(x))
        return pd.DataFrame(out)
