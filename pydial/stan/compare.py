"""Sandwich (Wald) intervals next to posterior intervals at the same level, stated in every table (equal-tailed)."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy.stats import norm

from pydial.estimation.spec import ESTIMAND_FIELDS, ModelSpec, check_level
from pydial.formatting import ITEMS_LABEL, by_score, cov_label

from ..exceptions import ArgumentTypeError, EstimandMismatchError
from . import idata as azio

__all__ = ["compare_intervals", "IntervalComparison"]

COLUMNS = ("estimate", "se", "ci_low", "ci_high", "post_mean", "post_sd", "cred_low", "cred_high", "width_ratio",
           "shift_se", "level")


def _draws(idata: Any, var: str, *dims: str) -> tuple[np.ndarray, list[str]] | None:
    """Return the draws of ``var`` over ``dims`` as ``(draws x entries, names)``; several dims' names joined by ``" | "``."""
    post = azio.group_dataset(idata, "posterior")
    if var not in post or not set(dims) <= set(post[var].dims):
        return None
    da = post[var].transpose("chain", "draw", *dims)
    x = np.asarray(da.values, dtype=float).reshape(da.sizes["chain"] * da.sizes["draw"], -1)
    names = [" | ".join(parts) for parts in itertools.product(*([str(v) for v in da[d].values] for d in dims))]
    return x, names


def _block(quantity: str, table: pd.DataFrame, draws: np.ndarray, names: list[str], level: float,
           same_level: bool) -> pd.DataFrame:
    missing = [str(n) for n in table.index if str(n) not in names]
    if missing:
        raise KeyError(f"{quantity}: {missing[:5]} of the frequentist table are not in the posterior coordinates")
    x = draws[:, [names.index(str(n)) for n in table.index]]
    alpha = 1.0 - level
    est, se = table[quantity].to_numpy(float), table["se"].to_numpy(float)
    if same_level and {"ci_low", "ci_high"} <= set(table.columns):
        lo, hi = table["ci_low"].to_numpy(float), table["ci_high"].to_numpy(float)
    else:
        z = norm.ppf(1.0 - alpha / 2.0)
        lo, hi = est - z * se, est + z * se
    q_lo, q_hi = np.quantile(x, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    pm, ps = x.mean(axis=0), x.std(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        width = (q_hi - q_lo) / (hi - lo)
        shift = (pm - est) / se
    index = pd.MultiIndex.from_arrays([[quantity] * len(table), [str(n) for n in table.index]], names=["quantity", "name"])
    return pd.DataFrame(dict(zip(COLUMNS, (est, se, lo, hi, pm, ps, q_lo, q_hi, width, shift, level))), index=index)


class IntervalComparison(pd.DataFrame):
    """The table of :func:`compare_intervals` (a :class:`pandas.DataFrame`) with a :meth:`~IntervalComparison.plot`."""

    @property
    def _constructor(self) -> type:
        return IntervalComparison

    def plot(self, *, figsize: tuple[float, float] | None = None) -> Any:
        """Draw both intervals per row, one panel per quantity; return the :class:`matplotlib.figure.Figure`.

        The Wald interval at the estimate and, below it, the equal-tailed posterior interval at the posterior mean
        (the legend names both, ``attrs["interval_frequentist"]`` and ``attrs["interval_bayes"]``); items by fitted
        score, highest on top.  The ``b`` and ``beta`` panels are centered at each row's estimate (its value in the
        row label), so that intervals of a few hundredths stay visible; the right margin gives each row's width ratio.
        """
        import matplotlib.pyplot as plt

        quantities = list(dict.fromkeys(self.index.get_level_values("quantity")))
        sizes = [int((self.index.get_level_values("quantity") == q).sum()) for q in quantities]
        if figsize is None:
            figsize = (8.0, 2.0 + 0.32 * sum(sizes) + 0.9 * len(quantities))
        fig, axes = plt.subplots(len(quantities), 1, figsize=figsize, squeeze=False, layout="constrained",
                                 gridspec_kw={"height_ratios": [max(n, 1) + 1.5 for n in sizes]})
        lv = self.attrs.get("level", float(self["level"].iloc[0]) if len(self) else 0.95)
        labels = (self.attrs.get("interval_frequentist", f"{lv:.0%} Wald interval"),
                  self.attrs.get("interval_bayes", f"{lv:.0%} equal-tailed posterior interval"))
        for ax, q in zip(axes[:, 0], quantities):
            t = self.xs(q, level="quantity")
            _interval_panel(ax, by_score(t, "estimate") if q == "score" else t, q, labels)
        handles, texts = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, texts, loc="outside lower center", fontsize=8, ncols=1)
        est = self.attrs.get("estimand")
        if est:
            fig.suptitle(est, fontsize=8)
        return fig


_PANELS = {"score": ("scores", "score (log-odds)"),
           "b": ("position effects b, centered at each judge's estimate", "b minus its Wald estimate (log-odds)"),
           "beta": ("covariate effects beta, centered at each estimate", "beta minus its Wald estimate (log-odds)")}


def _interval_panel(ax: Any, t: pd.DataFrame, quantity: str, labels: tuple[str, str]) -> None:
    """Draw one panel of :meth:`IntervalComparison.plot`: rows top to bottom in the order of ``t``."""
    import matplotlib.transforms as mtransforms

    title, xlabel = _PANELS.get(quantity, (quantity, f"{quantity} (log-odds)"))
    center = t["estimate"] if quantity != "score" else 0.0
    y = np.arange(len(t), dtype=float)
    est, pm = t["estimate"] - center, t["post_mean"] - center
    ax.errorbar(est, y - 0.15, xerr=[t["estimate"] - t["ci_low"], t["ci_high"] - t["estimate"]],
                fmt="o", color="C0", capsize=3, label=f"{labels[0]} (at the estimate)")
    ax.errorbar(pm, y + 0.15, xerr=[t["post_mean"] - t["cred_low"], t["cred_high"] - t["post_mean"]],
                fmt="s", color="C1", capsize=3, label=f"{labels[1]} (at the posterior mean)")
    names = [str(n) for n in t.index]
    if quantity != "score":
        names = [f"{n} ({quantity} = {v:.3f})" for n, v in zip(names, t["estimate"])]
        ax.axvline(0.0, color="grey", lw=0.5)
    ax.set_yticks(y, names)
    ax.set_ylim(len(t) - 0.5, -0.5)
    if quantity == "score":
        ax.set_ylabel(ITEMS_LABEL)
    right = mtransforms.blended_transform_factory(ax.transAxes, ax.transData)
    ax.text(1.01, -0.75, "width\nratio", transform=right, fontsize=7, va="bottom")
    for yi, w in zip(y, t["width_ratio"]):
        ax.text(1.01, yi, f"{w:.2f}", transform=right, fontsize=7, va="center")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def _describe(m: dict[str, tuple[Any, Any]]) -> str:
    return "; ".join(f"{k}: fit {a!r} vs posterior {b!r}" for k, (a, b) in m.items())


def compare_intervals(result: Any, idata: Any, *, level: float | None = None, match: bool = False,
                      fit: Callable[..., Any] | None = None, allow_unrecorded: bool = False) -> IntervalComparison:
    """Per item (and per judge for ``b``): sandwich interval next to the posterior interval of the same estimand.

    Parameters
    ----------
    result : DialResult-like
        A frequentist fit with ``scores`` (indexed by item: ``score, se, ci_low, ci_high``), optionally
        ``position_effects`` (by judge: ``b, se, ci_low, ci_high``) and ``level``.  The ``spec`` of a
        :class:`~pydial.DialResult` at its selected weight and rank (:meth:`pydial.ModelSpec.selected`) is checked
        against the posterior's; an object without a spec is compared as it is.
    idata : xarray.DataTree or arviz.InferenceData
        From :func:`pydial.stan.posterior`; its ``attrs["estimand"]`` names the variable of the method's scores
        (``s_H``; ``s_judges`` for ``judges``), and ``b`` (dim ``judge``) when present.
    level : float, optional
        Interval level; default the result's (``result.level``), else 0.95.  At another level than the result's,
        the Wald interval is recomputed as ``estimate -/+ z se``.
    match : bool, default False
        When the fit and the posterior estimate different things: ``False`` raises
        :class:`~pydial.exceptions.EstimandMismatchError` naming the differences; ``True`` refits the frequentist
        side to the posterior's spec (same data and fit options).  The frequentist DIAL fits report ``b`` from their
        LLM-only stage, so a posterior with the joint ``b`` (``options={"b_stage": "joint"}``) is then compared on
        the scores only (``attrs["omitted"]`` says why); sample with ``posterior(..., like=result)`` to compare ``b``.
    fit : callable, optional
        The refit of ``match=True``, called as ``fit(data, spec=...)``; default the function that fitted ``result``
        (:func:`pydial.fit`, ``result.fitter``; this module does not import the estimators).
    allow_unrecorded : bool, default False
        A posterior without an estimand record (not from :func:`pydial.stan.posterior`, or its attributes dropped)
        cannot be checked: ``False`` raises :class:`~pydial.exceptions.EstimandMismatchError`; ``True`` compares the
        two as they are, and ``attrs["estimand"]`` says that nothing was checked.

    Returns
    -------
    IntervalComparison
        A DataFrame indexed by ``(quantity, name)``, ``quantity`` in ``{"score", "b", "beta"}`` (``beta``: the
        covariate effects, named ``"judge | covariate"``), with columns ``estimate, se, ci_low, ci_high`` (sandwich /
        Wald), ``post_mean, post_sd, cred_low, cred_high`` (posterior, equal-tailed at the same level),
        ``width_ratio`` (credible width / Wald width), ``shift_se`` (``(post_mean - estimate) / se``: large for a
        posterior that left the MLE, e.g. one drifting to ``S' 1 = 0``) and ``level``.  ``attrs``: ``level``,
        ``interval`` (the interval types), ``estimand`` (one line: what both sides estimate, and where ``b`` comes
        from), ``refit``.  ``.plot()`` draws the intervals side by side.

    Raises
    ------
    pydial.ArgumentTypeError
        ``result`` is not a fit or ``idata`` not a posterior.
    EstimandMismatchError
        The two were made from different data (their fingerprints differ, whatever ``match``), estimate different
        things (``match=False``) or cannot be refitted to agree, or the posterior has no estimand record
        (``allow_unrecorded=False``).

    Examples
    --------
    The human Bradley-Terry fit against its posterior (needs a Stan backend; the program is compiled on first use):

    >>> import pydial
    >>> sim = pydial.simulate(N=4, K=2, rank=1, n_llm=2000, n_human=400, seed=1)
    >>> res = pydial.fit(sim.comparisons, "human")
    >>> idata = pydial.posterior(sim.comparisons, like=res, chains=2, draws=200, seed=1)
    >>> tab = pydial.compare_intervals(res, idata)
    >>> tab.index.names
    FrozenList(['quantity', 'name'])
    >>> bool(tab["width_ratio"].between(0.7, 1.3).all())
    True
    """
    from .bayes import estimand as post_estimand
    from .bayes import result_estimand

    if not isinstance(getattr(result, "scores", None), pd.DataFrame):
        raise ArgumentTypeError(f"result must be a fit with a scores table (pydial.fit), got {type(result).__name__}")
    try:
        groups = azio.group_names(idata)
    except (AttributeError, TypeError):
        groups = []
    if "posterior" not in groups:
        raise ArgumentTypeError("idata must be a posterior with a 'posterior' group (pydial.posterior: an "
                                f"xarray.DataTree or arviz.InferenceData), got {type(idata).__name__}")
    level = None if level is None else check_level(level)
    pe = post_estimand(idata)
    refit, omitted = False, ""
    if pe is None and not allow_unrecorded:
        raise EstimandMismatchError(
            "the posterior has no estimand record (attrs['estimand'] of pydial.stan.posterior), so it cannot be "
            "checked against the fit; sample it with pydial.stan.posterior(data, like=result), or pass "
            "allow_unrecorded=True to compare the two as they are", {"estimand": ("recorded", None)})
    score_var = (pe.scores if pe is not None else None) or "s_H"
    if pe is not None and isinstance(getattr(result, "spec", None), ModelSpec):
        mism = result_estimand(result).differences(pe)
        if "data" in mism:  # no refit helps: the two were fitted to different judgments
            raise EstimandMismatchError(
                f"the posterior was sampled on other data than the fit (data fingerprint: fit {mism['data'][0]!r} vs "
                f"posterior {mism['data'][1]!r}; the items may have the same names): sample the posterior of the "
                "fit's data, pydial.stan.posterior(result.data, like=result)", {"data": mism["data"]})
        if mism and match:
            if set(mism) != {"b_source"}:
                result, refit = _refit(result, pe, mism, fit), True
                mism = result_estimand(result).differences(pe)
            if set(mism) == {"b_source"}:
                omitted = (f"b omitted: the fit's b comes from {mism['b_source'][0]!r}, the posterior's from "
                           f"{pe.b_source!r} (sample with posterior(..., like=result) to compare b)")
                mism = {}
        if mism:
            raise EstimandMismatchError(f"the fit and the posterior estimate different things ({_describe(mism)}); sample "
                                        "pydial.stan.posterior(data, like=result), or pass match=True to refit the "
                                        "frequentist side", mism)
    r_level = getattr(result, "level", None)
    r_level = result.scores.attrs.get("level") if r_level is None else r_level
    r_level = None if r_level is None else float(r_level)
    lv = level if level is not None else check_level(r_level if r_level is not None else 0.95, "the result's level")
    same = r_level is not None and abs(lv - r_level) < 1e-12
    dr = _draws(idata, score_var, "item")
    if dr is None:
        raise KeyError(f"the posterior has no scores {score_var!r} over dimension 'item'")
    blocks = [_block("score", result.scores, *dr, lv, same)]
    pos = getattr(result, "position_effects", None)
    if not omitted and pos is not None and len(pos) and (dr := _draws(idata, "b", "judge")) is not None:
        blocks.append(_block("b", pos, *dr, lv, same))
    ce = getattr(result, "covariate_effects", None)
    if ce is not None and len(ce):
        dr = _draws(idata, "beta", "beta_judge", "covariate")
        if dr is None:
            raise KeyError("the result has covariate effects but the posterior has no beta over (beta_judge, covariate): "
                           "sample it from the same data (with their covariates)")
        flat = ce.set_axis([" | ".join(map(str, key)) for key in ce.index])
        blocks.append(_block("beta", flat, *dr, lv, same))
    out = IntervalComparison(pd.concat(blocks))
    out.attrs["level"] = lv
    algorithm = {"laplace": " (Laplace approximation)", "pathfinder": " (Pathfinder)"}.get(
        str(azio.posterior_attrs(idata).get("algorithm", "nuts")), "")
    out.attrs["interval_frequentist"] = (f"{lv:.0%} Wald interval, "
                                         f"{cov_label(getattr(result, 'cov_type', None), getattr(result, 'anchored_cov', None))}")
    out.attrs["interval_bayes"] = f"{lv:.0%} equal-tailed posterior interval{algorithm}"
    out.attrs["interval"] = f"{out.attrs['interval_frequentist']} vs {out.attrs['interval_bayes']}"
    out.attrs["estimand"], out.attrs["refit"] = _estimand_line(pe), refit
    if omitted:
        out.attrs["omitted"] = omitted
    return out


def _estimand_line(pe: Any) -> str:
    if pe is None:
        return "posterior without an estimand record (not checked: allow_unrecorded=True)"
    if pe.spec is None:
        return "the LLM-only posterior (no calibration)"
    e = pe.spec.estimand()
    parts = [e["method"] if pe.program is None else f"{e['method']} (user program {pe.program})"]
    if e["method"].startswith("dial"):
        lam = pe.weight
        parts += [f"rank {e['rank']}, calibration {e['calibration']}",
                  "lambda = inf (anchored; cut posterior)" if np.isinf(lam) else f"lambda = {lam:.4g}"]
    if e["ties"]:
        parts.append(f"ties {e['ties']}")
    b_text = {"llm-only": "b from the LLM-only stage on both sides", "joint": "b from the joint posterior",
              "judge": "b from each judge's own model", "none": "no b"}
    parts.append(b_text.get(pe.b_source, pe.b_source))
    if pe.scores == "s_judges":
        parts.append("scores: mean of the judges' scores")
    return "; ".join(parts)


def _refit(result: Any, pe: Any, mism: dict[str, tuple[Any, Any]], fit: Callable[..., Any] | None = None) -> Any:
    """Refit ``result`` (which has a spec) to the posterior's spec, on its data and with its options (meat, level, engine)."""
    data = getattr(result, "data", None)
    fit = fit if fit is not None else getattr(result, "fitter", None)
    if data is None or fit is None:
        raise EstimandMismatchError(f"cannot refit ({_describe(mism)}): the result does not carry its data and "
                                    "specification (fit it with pydial.fit)", mism)
    if pe.spec is None or pe.program is not None:
        what = "the LLM-only posterior" if pe.spec is None else f"the user program {pe.program}"
        raise EstimandMismatchError(f"cannot refit to {what}: it has no frequentist counterpart", mism)
    target = {k: getattr(pe.spec, k) for k in ESTIMAND_FIELDS + ("multiples", "include_endpoints", "selection")}
    return fit(data, spec=result.spec.replace(**target))


def interval_settings(level: float = 0.95) -> Any:
    """Context manager: arviz's interval settings at pydial's convention (one level, equal-tailed).

    Sets ``stats.ci_prob`` (and the older ``stats.hdi_prob``) to ``level`` and, where arviz has it, ``stats.ci_kind``
    to ``"eti"`` inside the ``with`` block, so that ``az.summary`` and the plots report the level of
    :func:`compare_intervals` and the frequentist tables, not arviz's 94% (arviz 0.x: highest-density, at ``level``).

    Examples
    --------
    >>> with pydial.stan.interval_settings():          # doctest: +SKIP
    ...     az.summary(idata, var_names=["s_H"])
    """
    level = check_level(level)
    az = azio.arviz()
    wanted = {"stats.ci_prob": float(level), "stats.hdi_prob": float(level), "stats.ci_kind": "eti"}
    return az.rc_context(rc={k: v for k, v in wanted.items() if k in az.rcParams.keys()})
