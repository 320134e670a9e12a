"""The result object of :func:`pydial.fit`: tables, covariances and derived inference.

An estimator returns an :class:`Estimate` (point estimates and linearizations, no
covariance); :func:`build_result` forms every covariance table from the linearizations and
constructs the :class:`DialResult` in one call (statsmodels' Model / Results split).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence, cast

import numpy as np
import pandas as pd
from scipy.special import expit

from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.data.names import name_list
from pydial.estimation.fitstats import FitStats, judgment_counts
from pydial.exceptions import (ArgumentError, ArgumentTypeError, CalibrationWarning, CovarianceWarning, DialError,
                               UnknownNameError, renamed_arguments)
from pydial.formatting import ITEMS_LABEL, by_score, format_pvalue
from pydial.inference.linearization import ANCHORED_COVS, COV_DESCRIPTIONS, COV_TYPES, Linearization
from pydial.model.chart import DEFAULT_CALIBRATION, DEFAULT_RANK, Structure
from pydial.model.identifiability import design_report
from pydial.optim import BOX

STATUSES: tuple[str, ...] = ("ok", "no admissible candidate", "not identified", "at bound", "not converged",
                             "degenerate covariance")
"""Values of :attr:`DialResult.status`, most serious failure first after ``"ok"``."""

COV_RENAMED = {"anchored_cov": "anchored_cov_type", "correction": "cluster_correction"}
"""Old keyword names of :meth:`DialResult.with_cov` / :meth:`~DialResult.cov_params` (deprecated)."""


@dataclass
class DialResult:
    r"""Result of :func:`fit`.

    Built once, by :func:`build_result`, from an estimator's :class:`Estimate` (point
    estimates and linearizations) with every covariance table formed from the
    linearizations; :meth:`with_cov` and :func:`with_verdict` return new results.

    Attributes
    ----------
    method, engine, cov_type : str
        How the fit was made.
    rank : int or None
        Disagreement rank of the structured LLM fit (the selected one for a rank grid);
        ``None`` for ``human``, ``judges`` and ``pooled``, which fit no such model.
    calibration : str or None
        Human calibration basis (``"mu"`` or ``"W"``; always ``"mu"`` for ``atc``);
        ``None`` for ``human``, ``judges`` and ``pooled``.  :meth:`dial_model` gives
        a DIAL model for every result.
    level : float
        Confidence level of every interval in the tables.
    scores : DataFrame
        Indexed by item: ``score, se, ci_low, ci_high`` (centered human-target scores;
        for ``"judges"`` the mean of the position-debiased judge scores).
    cov : DataFrame
        Covariance of the centered scores (item x item).
    position_effects : DataFrame or None
        Indexed by judge: ``b, se, ci_low, ci_high, z, p_value`` (Wald test of
        ``b_k = 0``, from the asymptotic normality of the stage-one fit); from the structured LLM-only fit for the
        DIAL methods and AtC, from each judge's own fit for ``judges`` (Davidson-Beaver
        with ties).
    position_effects_cov : DataFrame or None
        Covariance of the position effects (judge x judge, labelled like
        :attr:`position_effects`; see :meth:`position_test`).  ``None`` where there
        are no position effects.
    judge_scores : DataFrame or None
        Judge x item position-debiased scores ``S`` (LLM-only structured fit, or each
        judge's own fit for ``judges``).
    structure : Structure or None
        ``mu, gamma, U, V`` of the LLM-only structured fit (``S = gamma mu^T + U V^T``).
    calibration_coef : ndarray or None
        ``c_H`` relative to the normalized basis ``M`` (``mu`` or ``W``, with
        ``N^{-1} M^T M = I``; for ``pooled`` the normalized pooled score).
    lambda_ : float
        Calibration weight: ``inf`` for the anchored endpoint (and ``pooled``, ``atc``),
        0 for ``human``, NaN for ``judges`` (no human data enter the fit).
    converged : bool
        Every optimization reached its gradient tolerance inside the box (numpy: max
        gradient of the normalized loss; Stan: relative to the log density).
    grad_norm : float
        Largest max-norm gradient at the reported optima.
    loss_human : float
        :math:`\ell_H` at the reported scores (NaN without human data).
    gacv : DataFrame or None
        The weight path of ``dial-ada`` / ``dial-nopos``: ``lambda, multiple, gacv,
        l_H, trace, admissible, reason`` (and ``rank`` for a rank grid).
    fallback : bool
        ``True`` when no weight of the path passed the guards and the anchored endpoint
        is reported instead (DIAL-Ada / -noPos; a :class:`ConvergenceWarning` says so).
    chart, theta : Chart, ndarray or None
        The structured DIAL fit reported (DIAL methods): its calibrated
        :class:`pydial.model.chart.Chart` and coordinates (the staged fit at the endpoints;
        with ties the structural part of the tie fit's ``(theta, log nu)``).
    llm_chart, llm_theta : Chart, ndarray or None
        The structured LLM-only fit (the stage-one estimate) behind the position
        effects, consensus loadings and judge scores.
    path : tuple of PathEntry
        The fitted candidates behind :attr:`gacv` and DIAL-Anc's endpoint
        (:class:`pydial.estimation.selection.PathEntry`: chart, staged fit, candidate with its
        scores, optimum and GACV pieces), in the order of the table; empty for the
        other methods and for the tie fits.
    calibration_test : CalibrationTest or None
        Likelihood-ratio test of the calibration restriction ``s_H = M c``.
    consensus : DataFrame or None
        Consensus loadings ``gamma_k`` with intervals (LLM-only fit).
    tie_parameters : DataFrame or None
        With ``ties="davidson"``: Davidson's tie parameters ``nu`` by judge with ``se, ci_low, ci_high``;
        with ``ties="rao-kupper"`` the first column is the threshold ``tau`` instead
        (:attr:`~pydial.model.families.Family.label`).
    covariate_effects : DataFrame or None
        With data that carry response covariates (``Comparisons.from_frame(..., covariates=)``):
        the effects ``beta`` of ``logit p = ... + z' beta`` per judge (and the people, where the
        method fits them) and covariate, indexed by ``(judge, covariate)``, with ``se``,
        ``ci_low``, ``ci_high``, ``z``, ``p_value`` (the Wald test of ``beta = 0``); per
        standard deviation of the comparison covariate (:attr:`covariate_scale`).  The scores
        are then style-controlled: those of a comparison with ``z = 0``.  See :meth:`covariate_test`.
    covariate_effects_cov : DataFrame or None
        Their covariance, labelled like :attr:`covariate_effects`.
    covariate_scale : Series or None
        The standard deviation of each comparison covariate (``Comparisons.covariate_scale``).
    n_human, n_llm : int
        The human and LLM judgments the fit's likelihood used: the decisive ones for the binary
        models, with ties for a tie family (``ties=``); 0 for the side a method does not use
        (``n_llm`` of ``human``, ``n_human`` of ``judges``).
    nobs : int
        ``n_human + n_llm``, the judgments behind :attr:`llf` (and :attr:`bic`).
    n_obs_by_judge : Series
        The judgments used, by judge (the LLM judges, then the human judge).
    excluded : DataFrame
        The judgments left out, by judge (same index), one column per reason: ``ties`` (by the
        binary models), ``both_bad``, ``self_comparisons`` and ``not_used_by_method``; a judge's
        row plus its :attr:`n_obs_by_judge` is every judgment of the judge in the data.
    llf : float
        Log-likelihood of the judgments used at the estimate, per judgment (statsmodels' GLM on
        the long table of Bernoulli rows, no binomial coefficients; for a tie family the
        categorical log probability of each outcome).  For the staged and two-stage fits
        (``dial-anc``, ``pooled``, DIAL-Ada at ``lambda = inf``) the sum of the stage
        log-likelihoods at the estimate; for a finite weight the joint model's ``l_LLM + l_H``
        at the weighted fit; at ``lambda = 0`` the people's model plus the LLM-only fit.  NaN
        for ``atc`` (its isotonic scores are not a likelihood fit).
        See :mod:`pydial.estimation.fitstats`.
    df_model : int or None
        Free parameters after the gauge (:mod:`pydial.estimation.fitstats`: ``N - 1`` for the
        human BTL, ``K (N - 1) + K`` for ``judges``, ``(r + 1)(K + N - r - 2) + K + d`` for the
        structured DIAL model, plus tie parameters and covariate effects); ``None`` for ``atc``.
    aic, bic : float
        ``-2 llf + 2 df_model`` and ``-2 llf + log(nobs) df_model`` (properties).
    llf_human : float
        The people's log-likelihood at the reported scores (NaN for ``judges``).
    objective : float
        ``dial-ada`` / ``dial-nopos``: the weighted criterion ``Q_lambda = l_H + lambda l_L``
        (normalized losses; with the Firth penalty when penalized) at the
        estimate: what the weighted fit minimizes, **not a log-likelihood** (``l_H`` at
        ``lambda = 0``; NaN at ``lambda = inf``, where the staged fit minimizes two criteria in
        turn, and for the other methods).
    status : str
        The verdict on the numbers: ``"ok"``, or one of :data:`STATUSES`
        (``"no admissible candidate"``, ``"not identified"``, ``"at bound"``,
        ``"not converged"``, ``"degenerate covariance"``).  Anything but ``"ok"`` means the estimates are
        not a resolved maximum-likelihood fit (or their intervals are not valid);
        :meth:`summary` and ``summary.json`` say so, and the command line refuses
        them (exit 4) unless ``--allow-nonconverged``.  A calibration restriction rejected by
        its own test (:class:`~pydial.CalibrationWarning`) leaves the status ``"ok"``: the
        estimates are a resolved fit, the problem is the model; it is listed in :attr:`problems`.
    problems : tuple of str
        What went wrong, naming the judges and items to blame (empty when ``ok`` and the
        calibration restriction, where the method assumes one, is not rejected).
    data : Comparisons or None
        The data the fit was made on (a reference, not a copy; ``None`` for a result
        built by hand).  :func:`pydial.plan` and :func:`pydial.next_pairs` take the
        pilot data from here.
    penalty : str or None
        ``"firth"`` when the likelihoods were bias-reduced (:mod:`pydial.model.penalty`).
    ties : str or None
        The tie model (``"davidson"`` or ``"rao-kupper"``) or ``None`` (binary models).
    cluster_correction : bool
        Whether the clustered meats (``"cell"``, ``"record"``) carry the small-sample
        factor ``G/(G-1)`` (:func:`pydial.fit`'s ``cluster_correction``).
    anchored_cov_type : str or None
        :func:`pydial.fit`'s ``anchored_cov_type`` for the DIAL methods (``None`` otherwise);
        :attr:`anchored_cov` says whether it applies to the reported scores.
    judge_scores_se : DataFrame or None
        ``judges``: the standard errors of :attr:`judge_scores` (judge x item, each
        judge's own fit, meat ``cov_type``).
    stage_scores : DataFrame or None
        The score vectors behind a two-stage baseline, by item: ``pooled`` (the pooled
        LLM BTL scores before the rescaling to the people) for ``pooled``;
        ``anchored`` (the consensus before the isotonic step) and ``human`` (the human
        BTL scores giving the order) for ``atc``.
    linearization : tuple of Linearization
        The factored influence of every target with a covariance
        (:class:`pydial.inference.linearization.Linearization`): what :meth:`with_cov` and
        :meth:`cov_params` form any other covariance from, without refitting.
    spec : ModelSpec or None
        The specification the result was fitted from (:class:`pydial.ModelSpec`);
        ``pydial.fit(other_data, spec=result.spec)`` fits the same model again.
    fit_warnings : tuple of Warning
        The warnings raised while fitting (the basis of :attr:`status`).
    fitter : callable or None
        The function that made this result (:func:`pydial.fit`), with which
        :func:`pydial.stan.compare_intervals` refits another specification.
    """

    method: str
    rank: int | None
    calibration: str | None
    engine: str
    cov_type: str
    level: float
    items: tuple[str, ...]
    judges: tuple[str, ...]
    n_human: int
    n_llm: int
    scores: pd.DataFrame
    cov: pd.DataFrame
    position_effects: pd.DataFrame | None
    judge_scores: pd.DataFrame | None
    structure: Structure | None
    calibration_coef: np.ndarray | None
    lambda_: float
    converged: bool
    grad_norm: float
    loss_human: float
    gacv: pd.DataFrame | None = None
    calibration_test: Any = None
    consensus: pd.DataFrame | None = None
    tie_parameters: pd.DataFrame | None = None
    position_effects_cov: pd.DataFrame | None = None
    path: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    fallback: bool = False
    chart: Any = field(default=None, repr=False, compare=False)
    theta: np.ndarray | None = field(default=None, repr=False, compare=False)
    llm_chart: Any = field(default=None, repr=False, compare=False)
    llm_theta: np.ndarray | None = field(default=None, repr=False, compare=False)
    status: str = "ok"
    problems: tuple[str, ...] = ()
    penalty: str | None = None
    data: Comparisons | None = field(default=None, repr=False, compare=False)
    ties: str | None = None
    cluster_correction: bool = False
    anchored_cov_type: str | None = None
    judge_scores_se: pd.DataFrame | None = None
    stage_scores: pd.DataFrame | None = None
    linearization: tuple[Linearization, ...] = field(default=(), repr=False, compare=False)
    fit_warnings: tuple[Warning, ...] = field(default=(), repr=False, compare=False)
    fitter: Any = field(default=None, repr=False, compare=False)
    spec: Any = field(default=None, repr=False, compare=False)
    covariate_effects: pd.DataFrame | None = None
    covariate_effects_cov: pd.DataFrame | None = None
    covariate_scale: pd.Series | None = None
    nobs: int = 0
    n_obs_by_judge: pd.Series | None = None
    excluded: pd.DataFrame | None = None
    llf: float = np.nan
    df_model: int | None = None
    llf_human: float = np.nan
    objective: float = np.nan
    tie_log_nu: pd.Series | None = field(default=None, repr=False, compare=False)

    @property
    def aic(self) -> float:
        """Akaike's criterion ``-2 llf + 2 df_model`` (NaN without a likelihood)."""
        return np.nan if self.df_model is None else -2.0 * self.llf + 2.0 * self.df_model

    @property
    def bic(self) -> float:
        """Schwarz's criterion ``-2 llf + log(nobs) df_model`` (NaN without a likelihood)."""
        return np.nan if self.df_model is None else -2.0 * self.llf + np.log(self.nobs) * self.df_model

    @property
    def fit_arguments(self) -> dict[str, Any] | None:
        """The keyword arguments of :func:`pydial.fit` that made this result (:meth:`ModelSpec.arguments`)."""
        return None if self.spec is None else self.spec.arguments()

    @property
    def ok(self) -> bool:
        """``True`` when :attr:`status` is ``"ok"``."""
        return self.status == "ok"

    @property
    def anchored_cov(self) -> str | None:
        """The covariance at the anchored endpoint when a DIAL fit selected ``lambda = inf``.

        It is ``"two-step"`` or ``"fixed-basis"`` (:func:`pydial.fit`'s ``anchored_cov_type``);
        ``None`` otherwise.
        """
        return self.anchored_cov_type if np.isinf(self.lambda_) else None

    def used_the_judgments_of(self, data: Comparisons) -> bool:
        """Return whether ``data`` holds the items and, judge by judge, the judgments this fit used.

        E.g. for checking that a pilot result and its data belong together (:func:`pydial.plan`).
        """
        if tuple(data.items) != tuple(self.items) or self.n_obs_by_judge is None:
            return tuple(data.items) == tuple(self.items)
        used, _ = judgment_counts(data, self.ties, self.method)
        return used.index.equals(self.n_obs_by_judge.index) and bool((used == self.n_obs_by_judge).all())

    def _other_data(self, data: Comparisons) -> str:
        """Say how ``data`` differ from the data of this fit (for :meth:`used_the_judgments_of` failures)."""
        for what, theirs, ours in (("items", data.items, self.items), ("judges", data.judges, self.judges)):
            if tuple(theirs) != tuple(ours):
                return f"these data have the {what} {list(theirs)[:8]}, the fit {list(ours)[:8]}"
        return (f"these data hold other judgments (n_H {data.n_human}, n_LLM {data.n_llm}; the fit used n_H "
                f"{self.n_human}, n_LLM {self.n_llm})")

    def dial_model(self) -> tuple[int, str]:
        """``(rank, calibration)`` of the DIAL model that goes with this fit.

        These are the fitted ones, or :func:`pydial.fit`'s defaults (1, ``"mu"``) for a method without them
        (``human``, ``judges``, ``pooled``); e.g. the anchored model :func:`pydial.plan`
        builds on a pilot fit.
        """
        return (DEFAULT_RANK if self.rank is None else int(self.rank),
                DEFAULT_CALIBRATION if self.calibration is None else self.calibration)

    def verdict(self) -> str:
        """One line: the status and its problems (``"ok"`` when there are none).

        An ``"ok"`` fit with a problem of its model (a rejected calibration restriction) reads
        ``"ok, but: ..."``.
        """
        if not self.problems:
            return self.status
        return (f"{self.status}: " if not self.ok else "ok, but: ") + "; ".join(self.problems)

    # ------------------------------------------------------------- inference
    def contrast(self, item_i: str, item_j: str, level: float | None = None) -> pd.Series:
        """Wald interval of ``s_i - s_j`` and of the win probability ``sigma(s_i - s_j)``.

        The win probability's interval is by the delta method.  ``level`` (default: the
        fit's) must be in (0, 1), as for :meth:`conf_int`.

        Raises
        ------
        UnknownNameError
            ``item_i`` or ``item_j`` is not an item of the fit (the message lists the items).
        """
        from pydial.estimation.spec import check_level

        level = self.level if level is None else check_level(level)
        for argument, it in (("item_i", item_i), ("item_j", item_j)):
            UnknownNameError.check(argument, "item", [it], self.scores.index)
        w = self._contrasts([item_i], [item_j], level).iloc[0]
        est, se = float(w["estimate"]), float(w["se"])
        p = float(expit(est))
        return pd.Series(
            {
                "estimate": est, "se": se, "ci_low": float(w["ci_low"]), "ci_high": float(w["ci_high"]),
                "p_value": float(w["p_value"]) if se > 0 else np.nan,
                "win_prob": p, "win_prob_se": p * (1 - p) * se,
                "win_prob_ci_low": float(expit(w["ci_low"])), "win_prob_ci_high": float(expit(w["ci_high"])),
                "level": level,
            },
            name=f"{item_i} - {item_j}",
        )

    def _contrasts(self, first: list[str], second: list[str], level: float) -> pd.DataFrame:
        """Wald table of the contrasts ``s_first - s_second`` (elementwise), from the score covariance."""
        from pydial.inference.linearization import wald_frame

        s, C = self.scores["score"], self.cov
        a, b = self.scores.index.get_indexer(first), self.scores.index.get_indexer(second)
        Cv = C.to_numpy()
        var = Cv[a, a] + Cv[b, b] - 2 * Cv[a, b]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return wald_frame(s.to_numpy()[a] - s.to_numpy()[b], np.clip(var, 0.0, None),
                              [f"{i} - {j}" for i, j in zip(first, second)], level, "estimate")

    def cov_params(self, cov_type: str | None = None, what: str = "scores", *, anchored_cov_type: str | None = None,
                   cluster_correction: bool | None = None, **deprecated: Any) -> pd.DataFrame:
        """Covariance of the estimates as a labelled DataFrame, of any meat, without refitting.

        The empirical sandwich of the weighted fit with the meat ``cov_type`` (the
        cell-clustered or the record-clustered HAC meat), formed from :attr:`linearization`;
        ``"fixed-basis"`` is the ``M H_M^{-1} M^T`` limit as ``lambda -> inf``.

        Parameters
        ----------
        cov_type : {"fisher", "binomial", "cell", "record", "two-step", "fixed-basis"}, optional
            The meat (:mod:`pydial.inference.linearization`); default the fit's own :attr:`cov_type`.
            ``"two-step"`` / ``"fixed-basis"`` keep the fit's meat and choose the
            covariance at the anchored endpoint (``anchored_cov_type``; DIAL fits at
            ``lambda = inf`` only).
        what : {"scores", "b", "gamma"}
            The calibrated scores (item x item), the position effects or the consensus
            loadings (judge x judge).
        anchored_cov_type : {"two-step", "fixed-basis"}, optional
            Default the fit's.
        cluster_correction : bool, optional
            Scale the clustered meats by ``G/(G-1)``; default the fit's
            (:attr:`cluster_correction`).
        **deprecated
            The old names ``anchored_cov=`` and ``correction=`` (with a
            :class:`DeprecationWarning`).

        Returns
        -------
        DataFrame
            The fit's own covariance when nothing differs from the fit; otherwise the
            one :meth:`with_cov` would report (only that target's covariance is formed).
        """
        if what not in ("scores", "b", "gamma"):
            raise ArgumentError(f"what must be 'scores', 'b' or 'gamma', got {what!r}")
        settings = self._cov_settings(cov_type, anchored_cov_type, cluster_correction, deprecated, "cov_params")
        if what == "b" and self.position_effects is None:
            raise ArgumentError(f"method {self.method!r} has no position effects")
        if what == "gamma" and self.consensus is None:
            raise ArgumentError(f"method {self.method!r} has no consensus loadings")
        if settings == (self.cov_type, self.anchored_cov_type, self.cluster_correction) and what != "gamma":
            if what == "scores":
                return self.cov
            assert self.position_effects_cov is not None
            return self.position_effects_cov
        if what != "scores" or self.method != "atc":  # AtC's scores have no covariance
            self._require_linearization()
        C = block_covariances(self.linearization, cast(Comparisons, self.data), *settings, only=what).get(what)
        idx = self.cov.index if what == "scores" else pd.Index(list(self.judges), name="judge")
        return pd.DataFrame(np.full((len(idx), len(idx)), np.nan) if C is None else C, index=idx, columns=idx.copy())

    def with_cov(self, cov_type: str | None = None, *, anchored_cov_type: str | None = None,
                 cluster_correction: bool | None = None, **deprecated: Any) -> "DialResult":
        """Return the same fit with every covariance, standard error and interval of another meat.

        The estimates are unchanged; the score, position-effect, consensus,
        tie-parameter and judge-score tables and their covariances are recomputed from
        the fit's :attr:`linearization` (statsmodels' ``get_robustcov_results``), equal to
        a refit with the same ``cov_type``, ``anchored_cov_type`` and ``cluster_correction``: the
        empirical sandwich of the weighted fit with the cell-clustered or the record-clustered
        HAC meat, at the anchored endpoint the two-step or the fixed-basis limit
        (``lambda -> inf``).

        Parameters
        ----------
        cov_type : {"fisher", "binomial", "cell", "record", "two-step", "fixed-basis"}, optional
            As in :meth:`cov_params`; default the fit's.
        anchored_cov_type : {"two-step", "fixed-basis"}, optional
            The covariance at the anchored endpoint; default the fit's.
        cluster_correction : bool, optional
            Scale the clustered meats by ``G/(G-1)``; default the fit's.
        **deprecated
            The old names ``anchored_cov=`` and ``correction=`` (with a
            :class:`DeprecationWarning`).

        Returns
        -------
        DialResult
            A new result; :attr:`status` is re-derived (a degenerate meat makes it
            ``"degenerate covariance"``).
        """
        cov, anchored, corr = self._cov_settings(cov_type, anchored_cov_type, cluster_correction, deprecated, "with_cov")
        if (cov, anchored, corr) == (self.cov_type, self.anchored_cov_type, self.cluster_correction):
            return dataclasses.replace(self)  # nothing to recompute
        self._require_linearization()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            C = block_covariances(self.linearization, cast(Comparisons, self.data), cov, anchored, corr)
            fields = covariance_tables(C, self.items, self.judges, self.level, self.ties, **self._point_estimates())
        keep = tuple(w for w in self.fit_warnings if not isinstance(w, CovarianceWarning))
        new = tuple(w.message for w in caught)
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        out = dataclasses.replace(self, cov_type=cov, anchored_cov_type=anchored, cluster_correction=corr,
                                  status="ok", problems=(), **fields)
        seed = None if self.spec is None else self.spec.seed
        assert self.data is not None  # _require_linearization
        return with_verdict(out, self.data, list(keep) + [w for w in new if isinstance(w, Warning)],
                            seed=0 if seed is None else seed)

    def _point_estimates(self) -> dict[str, Any]:
        """Return the estimates behind the covariance tables, as :func:`covariance_tables` takes them."""
        tp = self.tie_parameters
        pe = self.position_effects
        log_nu = None if tp is None else self.tie_log_nu
        ce = self.covariate_effects
        beta, free = None, None
        labels: tuple[str, ...] = ()
        names: tuple[str, ...] = ()
        if ce is not None:  # the whole rows of beta: 0 at the entries not estimated (not in the table)
            assert self.data is not None  # _require_linearization
            labels, names = tuple(str(x) for x in ce.index.unique("judge")), self.data.covariates
            free = beta_support(self.data, labels)
            beta = np.zeros((len(labels), len(names)))
            rows, cols = (pd.Index(v).get_indexer(ce.index.get_level_values(lev)) for v, lev in ((labels, "judge"),
                                                                                            (names, "covariate")))
            beta[rows, cols] = ce["beta"].to_numpy(float)
        return dict(s=self.scores["score"].to_numpy(), b=None if pe is None else pe["b"].to_numpy(),
                    gamma=None if self.consensus is None else self.consensus["gamma"].to_numpy(),
                    judge_scores=None if self.judge_scores is None else self.judge_scores.to_numpy(), log_nu=log_nu,
                    beta=beta, beta_labels=labels, covariates=names,
                    beta_free=free)

    def _require_linearization(self) -> None:
        """Raise an :class:`~pydial.ArgumentError` unless this result can form other covariances."""
        if not self.linearization:
            raise ArgumentError(f"this {self.method!r} result carries no linearization; refit with "
                                "pydial.fit(..., cov_type=...)")
        if self.data is None:
            raise ArgumentError("other covariances need the data the fit was made on (result.data)")

    def _cov_settings(self, cov_type: str | None, anchored_cov_type: str | None, cluster_correction: bool | None,
                      deprecated: dict[str, Any], caller: str) -> tuple[str, str | None, bool]:
        """``(meat, anchored_cov_type, cluster_correction)``, the fit's own settings for what is not given."""
        if deprecated:
            old = renamed_arguments(caller, deprecated, COV_RENAMED, COV_RENAMED.values())
            anchored_cov_type = old.get("anchored_cov_type", anchored_cov_type)
            cluster_correction = old.get("cluster_correction", cluster_correction)
        cov = self.cov_type if cov_type is None else cov_type
        anchored = self.anchored_cov_type if anchored_cov_type is None else anchored_cov_type
        if cov in ANCHORED_COVS:
            if anchored_cov_type is not None and anchored_cov_type != cov:
                raise ArgumentError(f"cov_type={cov!r} and anchored_cov_type={anchored_cov_type!r} disagree")
            cov, anchored = self.cov_type, cov
        if cov not in COV_TYPES:
            hint = " (the target is chosen by what=)" if cov in ("scores", "b", "gamma") else ""
            raise ArgumentError(f"cov_type must be one of {COV_TYPES + ANCHORED_COVS}, got {cov_type!r}{hint}")
        if anchored is not None and anchored not in ANCHORED_COVS:
            raise ArgumentError(f"anchored_cov_type must be one of {ANCHORED_COVS}, got {anchored_cov_type!r}")
        if anchored != self.anchored_cov_type and self.anchored_cov_type is None:
            raise ArgumentError(f"anchored_cov_type applies to the DIAL methods only, not {self.method!r}")
        if cluster_correction is not None and not isinstance(cluster_correction, (bool, np.bool_)):
            raise ArgumentTypeError(f"cluster_correction must be True or False, got {cluster_correction!r}")
        return cov, anchored, bool(self.cluster_correction if cluster_correction is None else cluster_correction)

    def conf_int(self, level: float | None = None, what: str = "scores", cov_type: str | None = None) -> pd.DataFrame:
        """Wald intervals at ``level`` from the fit's covariance (or another meat's), without refitting.

        Parameters
        ----------
        level : float, optional
            Confidence level (default: the fit's).
        what : {"scores", "b", "contrasts"}
            The scores, the position effects, or every contrast ``s_i - s_j`` (``i`` before
            ``j`` in the item order; index ``"i - j"``).
        cov_type : str, optional
            Another meat (or anchored covariance) as in :meth:`cov_params`; default the fit's.

        Returns
        -------
        DataFrame
            ``estimate, se, ci_low, ci_high`` (NaN where the covariance has none, e.g. AtC).
        """
        from pydial.estimation.spec import check_level
        from pydial.inference.linearization import wald_frame

        level = self.level if level is None else check_level(level)
        if cov_type is not None:
            return self.with_cov(cov_type).conf_int(level, what)
        if what == "contrasts":
            items = list(self.scores.index)
            iu, ju = np.triu_indices(len(items), 1)
            tab = self._contrasts([items[k] for k in iu], [items[k] for k in ju], level)
        elif what in ("scores", "b"):
            C_df = self.cov_params(what=what)
            if what == "scores":
                est = self.scores["score"].to_numpy()
            else:
                assert self.position_effects is not None  # cov_params raised otherwise
                est = self.position_effects["b"].to_numpy()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                tab = wald_frame(est, np.diag(C_df.to_numpy()), list(C_df.index), level, "estimate")
        else:
            raise ArgumentError(f"what must be 'scores', 'b' or 'contrasts', got {what!r}")
        tab = tab[["estimate", "se", "ci_low", "ci_high"]]
        tab.attrs["level"] = level
        return tab

    def loo_cv(self, data: Comparisons) -> pd.DataFrame:
        """Exact leave-one-human-comparison-out loss ``CV_loo`` (refits) beside GACV.

        It is computed for every admissible candidate of the weight path (Thm. gacv), for checking GACV on
        small problems (at most ``2 x`` human cells refits per candidate, ``3 x`` with ties).

        Parameters
        ----------
        data : Comparisons
            The data this fit was made on (:attr:`data`).

        Raises
        ------
        ArgumentTypeError
            ``data`` is not a :class:`~pydial.Comparisons` (e.g. the DataFrame it was read from).
        ArgumentError
            The fit has no weight path, or ``data`` are not the judgments the fit used.
        """
        from pydial.estimation.selection import loo_cv

        data = require_comparisons(data)
        if self.gacv is None or not self.path:
            raise ArgumentError("loo_cv needs a weight path (method 'dial-ada' or 'dial-nopos')")
        if not self.used_the_judgments_of(data):
            raise ArgumentError(f"data: loo_cv refits on the data of this fit (result.data), but {self._other_data(data)}")
        ties = self.spec.ties if self.spec is not None else None
        rows = []
        for e in self.path:
            c = e.candidate
            if not c.admissible:
                continue
            theta = e.staged_theta if np.isinf(c.lambda_) or c.lambda_ == 0 else c.theta
            rows.append({"rank": e.chart.r, "lambda": c.lambda_, "gacv": c.gacv,
                         "cv_loo": loo_cv(data, e.chart, c.lambda_, theta, ties)})
        return pd.DataFrame(rows)

    def position_test(self, judge_1: str, judge_2: str) -> pd.Series:
        """Wald test of ``b_k = b_k'`` for two judges (from the stage-one fit's asymptotic normality).

        Raises
        ------
        ArgumentError
            The method has no position effects.
        UnknownNameError
            ``judge_1`` or ``judge_2`` is not a judge with a position effect (the message lists them).
        """
        from pydial.inference.linearization import wald_frame

        if self.position_effects is None:
            raise ArgumentError(f"method {self.method!r} has no position effects")
        C = self.position_effects_cov
        assert C is not None  # set with the position effects
        for argument, j in (("judge_1", judge_1), ("judge_2", judge_2)):
            UnknownNameError.check(argument, "judge", [j], self.position_effects.index,
                                   hint=" (the judges with a position effect)")
        b = self.position_effects["b"]
        diff = float(b[judge_1] - b[judge_2])
        var = max(C.loc[judge_1, judge_1] + C.loc[judge_2, judge_2] - 2 * C.loc[judge_1, judge_2], 0.0)
        name = f"b[{judge_1}] - b[{judge_2}]"
        w = wald_frame(np.array([diff]), np.array([var]), [name], self.level, "difference").iloc[0]
        return pd.Series({"difference": diff, "se": float(w["se"]), "z": float(w["z"]), "p_value": float(w["p_value"])},
                         name=name)

    def covariate_test(self, judge: str, against: str | None = None, covariates: Sequence[str] | None = None
                       ) -> pd.Series:
        """Wald test that a judge's covariate effects are 0, or equal to another row's (e.g. the people's).

        The covariate analogue of :meth:`position_test` (Wald tests from the stage-one fit), on
        ``beta`` of ``logit p = ... + z' beta`` (the LLM and human BTL models with covariates).

        ``beta_k = 0`` (``against=None``) or ``beta_k = beta_against`` (``against`` a judge or the
        human judge's name: "does this judge prefer length more than people do?") over the
        ``covariates`` (default every one estimated for both rows; an effect fixed at 0 has no
        test), a chi-square test with one degree of freedom per covariate, from
        :attr:`covariate_effects_cov` (the fit's ``cov_type``).

        Returns
        -------
        pandas.Series
            ``difference`` (the first covariate's, for one), ``chi2``, ``df``, ``p_value`` and, for one
            covariate, ``se`` and ``z``.

        Raises
        ------
        ArgumentError
            The fit has no covariate effects, or ``against`` is ``judge``.
        ArgumentTypeError
            ``covariates`` is not a list of names (e.g. one string: pass ``["length"]``).
        UnknownNameError
            ``judge``, ``against`` or a covariate is unknown (the message lists the known ones), or
            an effect is fixed at 0.
        """
        from scipy import stats

        ce, C = self.covariate_effects, self.covariate_effects_cov
        if ce is None or C is None:
            raise ArgumentError(f"this {self.method!r} fit has no covariate effects (fit data with covariates=)")
        rows = list(ce.index.unique("judge"))
        fitted = {*self.judges, *(() if self.data is None else (self.data.human_judge,))}
        for argument, name in (("judge", judge), *(() if against is None else (("against", against),))):
            if name in fitted and name not in rows:
                raise UnknownNameError(f"{argument}: no covariate effects for {name!r} in this {self.method!r} fit; "
                                       f"the rows with covariate effects are {', '.join(map(repr, rows))}")
            UnknownNameError.check(argument, "judge", [name], rows, hint=" (the rows with covariate effects)")
        if against == judge:
            raise ArgumentError(f"judge and against are both {judge!r}: against= names another row (a judge or the "
                                "human judge), or is None to test the effects against 0")
        pos = {key: t for t, key in enumerate(ce.index)}
        who = (judge, *(() if against is None else (against,)))
        names = ([c for c in ce.index.unique("covariate") if all((w, c) in pos for w in who)] if covariates is None
                 else [str(c) for c in name_list(covariates, "covariates")])  # default: every one of both rows
        UnknownNameError.check("covariates", "covariate", names, ce.index.unique("covariate"))
        fixed = [(w, c) for w in who for c in names if (w, c) not in pos]
        if fixed:
            raise UnknownNameError(f"covariates: no estimated covariate effect {fixed}: the covariate is 0 on all of "
                                   "that row's comparisons, so its effect is a fixed 0 (e.g. the people's and the "
                                   "unmapped judges' self_preference); leave it out of covariates=")
        L = np.zeros((len(names), len(ce)))
        for t, c in enumerate(names):
            L[t, pos[(judge, c)]] = 1.0
            if against is not None:
                L[t, pos[(against, c)]] -= 1.0
        d = L @ ce["beta"].to_numpy(float)
        V = L @ C.to_numpy(float) @ L.T
        chi2 = float(d @ np.linalg.solve(V, d))
        name = f"beta[{judge}]" + ("" if against is None else f" - beta[{against}]")
        out = {"difference": float(d[0]), "chi2": chi2, "df": len(names), "p_value": float(stats.chi2.sf(chi2, len(names)))}
        if len(names) == 1:
            out |= {"se": float(np.sqrt(V[0, 0])), "z": float(d[0] / np.sqrt(V[0, 0]))}
        return pd.Series(out, name=f"{name} ({', '.join(names)})")

    def win_probabilities(self) -> pd.DataFrame:
        """Matrix of ``sigma(s_i - s_j)`` (row item beats column item)."""
        s = self.scores["score"].to_numpy()
        return pd.DataFrame(expit(s[:, None] - s[None, :]), index=self.scores.index, columns=self.scores.index)

    def ranking(self) -> pd.Series:
        """Items ordered by score, best first."""
        return self.scores["score"].sort_values(ascending=False)

    def bootstrap(self, B: int = 200, *, by: str = "record", seed: int | None = None, n_jobs: int = 1,
                  level: float | None = None, progress: bool | None = None) -> Any:
        """Post-selection intervals by refitting the whole procedure on ``B`` record resamples.

        The GACV choice of ``lambda``, and of ``r`` with a rank grid, is included; percentile and
        basic intervals for scores, contrasts and ``b`` plus the selected ``lambda``
        distribution.  See :func:`pydial.estimation.bootstrap.bootstrap`.
        """
        from pydial.estimation.bootstrap import bootstrap

        return bootstrap(self, B, by=by, seed=seed, n_jobs=n_jobs, level=level, progress=progress)

    # ---------------------------------------------------------------- report
    def summary(self) -> str:
        """Return a statsmodels-like text summary.

        The header says how the fit was made: ``rank`` and ``calibration`` (``None``
        where the method has none), ``lambda`` (``n/a`` for ``judges``), the
        covariance ``cov_type`` and, at the anchored endpoint, ``anchored_cov``.  AtC
        has no standard errors for its scores: its header says so instead of naming a
        covariance, and its score table has no standard-error columns.  The judgments used
        (and those left out, by reason), the log-likelihood with ``df_model``, AIC and BIC (and
        for the weighted fits their criterion ``Q_lambda``, which is not a log-likelihood), and
        the calibration test follow; a rejected calibration restriction is listed as a warning.
        Every p-value is printed by :func:`pydial.formatting.format_pvalue` (never ``0``).
        """
        lam = "n/a" if np.isnan(self.lambda_) else "inf" if np.isinf(self.lambda_) else f"{self.lambda_:.4g}"
        cov = f"cov_type={self.cov_type} ({COV_DESCRIPTIONS[self.cov_type]})"
        if self.anchored_cov is not None:
            cov += f"  anchored_cov_type={self.anchored_cov}"
        if self.cluster_correction:
            cov += "  cluster correction G/(G-1)"
        head = [
            f"pydial fit: method={self.method}  rank={self.rank}  calibration={self.calibration}  engine={self.engine}",
            f"items N={len(self.items)}  LLM judges K={len(self.judges)}  judgments used: n_LLM={self.n_llm}  "
            f"n_H={self.n_human}" + ("" if self.ties is None else f" (ties included: {self.ties})"),
            f"lambda={lam}  converged={self.converged}  max|grad|={self.grad_norm:.2e}"
            + (f"  penalty={self.penalty}" if self.penalty else ""),
            (f"scores: AtC has no standard errors (its isotonic calibration step has no linearization)"
             f"{'; position effects: ' + cov if self.position_effects is not None else ''}"
             if self.method == "atc" else f"covariance: {cov}") + f"  level={self.level:.0%}",
        ]
        if not self.ok:
            head.insert(0, "*** NOT A VALID FIT (status: " + self.status + "); the numbers below are marked, not results ***")
        head += [f"{'problem' if not self.ok else 'warning'}: {p}" for p in self.problems]
        head.append(f"status: {self.status}")
        head += self._fit_lines()
        scores = self.scores[["score"]] if self.method == "atc" else self.scores
        with pd.option_context("display.width", 120, "display.max_rows", 200):
            style = "" if self.covariate_scale is None else "; style-controlled at z = 0; covariate scales: " + ", ".join(
                f"{c} {v:.4g}" for c, v in self.covariate_scale.items())
            parts = ["\n".join(head), "", f"Scores (centered{style}; {ITEMS_LABEL}):", _text(by_score(scores))]
            if self.gacv is not None:
                from pydial.estimation.selection import selection_lines

                tab = self.gacv.round({c: 6 for c in self.gacv.columns if c != "gap"})  # a gap below 1e-6 is a near-tie
                parts += ["", "GACV path:", tab.to_string(index=False), *selection_lines(self.gacv)]
            if self.tie_parameters is not None:
                label = {"rao-kupper": "tau (Rao-Kupper threshold)"}.get(self.tie_parameters.attrs.get("model"),
                                                                          "nu (Davidson / Davidson-Beaver)")
                parts += ["", f"Tie parameters {label}:", _text(self.tie_parameters)]
            if self.position_effects is not None:
                parts += ["", "Position effects b_k (LLM-only fit; b > 0 favours the first-shown item):",
                          _text(self.position_effects)]
            if self.covariate_effects is not None:
                parts += ["", "Covariate effects beta (per standard deviation of the comparison covariate; beta > 0 "
                          "favours the response with more of it):", _text(self.covariate_effects)]
        return "\n".join(parts)

    def _fit_lines(self) -> list[str]:
        """Return the summary's lines on the judgments left out, the likelihood and the calibration test."""
        out = []
        if self.excluded is not None:
            tot = self.excluded.sum()
            left = ", ".join(f"{c.replace('_', ' ')} {int(v)}" for c, v in tot.items() if v)
            out.append(f"judgments left out: {left or 'none'}  (by judge: result.excluded)")
        if self.df_model is not None:
            out.append(f"log-likelihood llf={self.llf:.4f}  df_model={self.df_model}  nobs={self.nobs}  "
                       f"AIC={self.aic:.2f}  BIC={self.bic:.2f}")
        elif self.method == "atc":
            out.append("log-likelihood: none (AtC's isotonic scores are not a likelihood fit)")
        if not np.isnan(self.objective):
            out.append(f"weighted criterion Q_lambda={self.objective:.6f} (the objective the weighted fit minimizes; "
                       "not a log-likelihood)")
        if not np.isnan(self.llf_human):
            out.append(f"people's log-likelihood at the scores llf_human={self.llf_human:.4f}  "
                       f"(human loss l_H={self.loss_human:.6f})")
        ct = self.calibration_test
        if ct is not None:
            out.append("calibration test (LRT of s_H = M c): " + (
                f"T={ct.statistic:.4g}  df={ct.df}  p={format_pvalue(ct.p_value)}  AIC prefers {ct.aic_prefers}"
                if ct.defined else f"undefined ({ct.reason})"))
        return out

    def __repr__(self) -> str:
        """Return a one-line description of the fit."""
        return (f"DialResult(method={self.method!r}, N={len(self.items)}, K={len(self.judges)}, "
                f"lambda={self.lambda_}, converged={self.converged}, status={self.status!r})")



def _text(table: pd.DataFrame) -> str:
    """Return a table of the summary: numbers to 4 decimals, p-values by :func:`~pydial.formatting.format_pvalue`."""
    out = table.round(4)
    if "p_value" in out:
        out = out.astype({"p_value": object})
        out["p_value"] = [format_pvalue(float(p)) for p in table["p_value"]]
    return out.to_string()


@dataclass(frozen=True)
class Estimate:
    r"""What an estimator returns: the point estimates and their linearizations, no covariance.

    :func:`build_result` forms every covariance table from :attr:`linearization` once (the
    meat of the :class:`~pydial.ModelSpec`) and makes the :class:`DialResult`.  The estimates
    with a covariance are ``s`` (scores, by item), ``b`` (position effects, by judge),
    ``gamma`` (consensus loadings, by judge), ``judge_scores`` (judge x item) and ``log_nu``
    (log tie parameters by group label; ``-inf`` for a group without ties, ``nu = 0``); an
    estimate that no linearization covers (AtC's scores) has a NaN covariance.  The other
    fields are those of :class:`DialResult` of the same name; ``rank`` and ``calibration`` are
    ``None`` for a method without them, ``stage_scores`` the columns of
    :attr:`DialResult.stage_scores`, ``stats`` the log-likelihood, parameter count and weighted
    criterion (:class:`~pydial.estimation.fitstats.FitStats`).
    """

    s: np.ndarray
    lambda_: float
    converged: bool
    grad_norm: float
    loss_human: float
    linearization: tuple[Linearization, ...]
    rank: int | None = None
    calibration: str | None = None
    b: np.ndarray | None = None
    gamma: np.ndarray | None = None
    judge_scores: np.ndarray | None = None
    log_nu: pd.Series | None = None
    structure: Structure | None = None
    calibration_coef: np.ndarray | None = None
    gacv: pd.DataFrame | None = None
    calibration_test: Any = None
    path: tuple[Any, ...] = ()
    fallback: bool = False
    chart: Any = None
    theta: np.ndarray | None = None
    llm_chart: Any = None
    llm_theta: np.ndarray | None = None
    stage_scores: dict[str, np.ndarray] | None = None
    beta: np.ndarray | None = None
    beta_labels: tuple[str, ...] = ()
    stats: FitStats | None = None


def tie_log_nu(labels: list[str], log_nu: np.ndarray, free: np.ndarray | None = None) -> pd.Series:
    """Return the log tie parameters of the groups ``labels`` as :attr:`Estimate.log_nu` takes them.

    ``log_nu``: one value per label, or with ``free`` (the rows with a tie parameter) one per
    free row; the others (and non-finite values) are ``-inf`` (no ties, ``nu = 0``).
    """
    out = np.full(len(labels), -np.inf)
    if free is None:
        out[:] = log_nu
    else:
        out[free] = log_nu
    return pd.Series(out, index=pd.Index(labels, name="judge"))


def block_covariances(linearization: tuple[Linearization, ...], data: Comparisons, cov: str, anchored: str | None,
                      correction: bool, only: str | None = None) -> dict[str, Any]:
    """Return the covariance of every target of ``linearization`` (``judge_scores``, ``log_nu``: lists of pairs).

    ``(cov, anchored, correction)`` are the meat, the anchored covariance and the cluster
    correction; ``only``: form just the linearizations holding that target.
    """
    out: dict[str, Any] = {"judge_scores": [], "log_nu": []}
    for lin in linearization:
        if only is not None and only not in lin.blocks:
            continue
        C = lin.covariance(data, cov, anchored_cov_type=anchored or "two-step", cluster_correction=correction)
        for name, sl in lin.blocks.items():
            if name in ("judge_scores", "log_nu"):
                out[name].append((lin, C[sl, sl]))
            else:
                out[name] = C[sl, sl]
    return out


def covariance_tables(C: dict[str, Any], items: tuple[str, ...], judges: tuple[str, ...], level: float,
                      ties: str | None, *, s: np.ndarray, b: np.ndarray | None = None, gamma: np.ndarray | None = None,
                      judge_scores: np.ndarray | None = None, log_nu: pd.Series | None = None,
                      beta: np.ndarray | None = None, beta_labels: tuple[str, ...] = (),
                      covariates: tuple[str, ...] = (), beta_free: np.ndarray | None = None) -> dict[str, Any]:
    """Return every table of the estimates with the covariances ``C`` of :func:`block_covariances`.

    The fields ``scores, cov, position_effects, position_effects_cov, consensus,
    judge_scores_se, tie_parameters`` of :class:`DialResult` (``None`` without the estimate); an
    estimate without a covariance in ``C`` has NaN standard errors.  ``beta_free``: the estimated
    entries of ``beta`` (:func:`beta_support`; default all), the only ones in the table.
    """
    from pydial.inference.linearization import consensus_table, position_effect_tables, score_tables, tie_table

    def cov(name: str, q: int) -> np.ndarray:
        return C[name] if name in C else np.full((q, q), np.nan)  # no linearization: no covariance

    out: dict[str, Any] = dict(position_effects=None, position_effects_cov=None, consensus=None, judge_scores_se=None,
                               tie_parameters=None, covariate_effects=None, covariate_effects_cov=None)
    if beta is not None:
        free = np.ones(beta.shape, bool) if beta_free is None else beta_free
        out["covariate_effects"], out["covariate_effects_cov"] = covariate_effect_tables(
            beta, cov("beta", int(free.sum())), beta_labels, covariates, level, free)
    out["scores"], out["cov"] = score_tables(s, cov("scores", len(items)), items, level)
    if b is not None:
        out["position_effects"], out["position_effects_cov"] = position_effect_tables(b, cov("b", len(judges)), judges,
                                                                                      level)
    if gamma is not None:
        out["consensus"] = consensus_table(gamma, cov("gamma", len(judges)), judges, level)
    if C["judge_scores"] and judge_scores is not None:
        se = np.sqrt(np.array([np.diag(Ck) for _, Ck in C["judge_scores"]]))
        out["judge_scores_se"] = pd.DataFrame(se, index=pd.Index(judges, name="judge"),
                                              columns=pd.Index(items, name="item"))
    if log_nu is not None:
        assert ties is not None  # tie parameters come with a tie model
        var = np.full(len(log_nu), np.nan)
        for lin, Cn in C["log_nu"]:
            var[log_nu.index.get_indexer(list(lin.tie_labels))] = np.diag(Cn)
        rows = np.arange(len(log_nu))
        free = rows[np.isfinite(log_nu.to_numpy(float))]
        out["tie_parameters"] = tie_table(list(log_nu.index), rows, free, log_nu.to_numpy(float)[free], var[free], level,
                                          ties)
    return out


def beta_support(data: Comparisons, labels: Sequence[str]) -> np.ndarray | None:
    """Return the estimated entries of ``beta`` with rows ``labels`` (bool, rows x ``p``), ``None`` when all are.

    A row's entry is estimated unless its covariate is 0 on all the row's cells (then a fixed 0,
    :attr:`~pydial.Comparisons.covariate_support`): a judge's row, the people's
    (``data.human_judge``), or a row shared by the LLM judges (any other label).
    """
    sup = data.covariate_support
    if sup.all():
        return None
    index = {name: k for k, name in enumerate(data.judges)} | {data.human_judge: data.K}
    return np.array([sup[index[lab]] if lab in index else sup[:-1].any(axis=0) for lab in labels], bool).reshape(-1, data.p)


def covariate_effect_tables(beta: np.ndarray, cov: np.ndarray, labels: Sequence[str], covariates: Sequence[str],
                            level: float, free: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the covariate effects ``beta`` (rows ``labels`` x ``covariates``): Wald table and covariance.

    ``beta`` of the covariate term ``z' beta`` added to eq. binomial-model-llm / -human.

    Indexed by ``(judge, covariate)`` in the order of ``beta.ravel()`` (judge-major); the
    columns of :func:`~pydial.inference.linearization.wald_table` with the estimate named ``beta``.
    Only the entries ``free`` (default all) are listed: the others are fixed at 0, not estimated.
    """
    from pydial.inference.linearization import wald_table

    idx = pd.MultiIndex.from_product([list(labels), list(covariates)], names=["judge", "covariate"])
    keep = np.ones(len(idx), bool) if free is None else np.ravel(free)
    idx = idx[keep]
    tab = wald_table(np.ravel(beta)[keep], cov, [f"{k}:{c}" for k, c in idx], level, "beta")
    tab.index = idx
    return tab, pd.DataFrame(np.asarray(cov, float), index=idx, columns=idx.copy())


def build_result(est: Estimate, spec: Any, data: Comparisons, *, fitter: Any = None) -> DialResult:
    """Return the :class:`DialResult` of an estimate: every covariance table formed once from its linearization.

    ``spec`` (:class:`~pydial.ModelSpec`) gives the method, engine, meat, anchored
    covariance, cluster correction, level, penalty and tie model; ``fitter`` the function
    that refits it (:func:`pydial.fit`).  The verdict (:attr:`DialResult.status`) is
    :func:`with_verdict`'s.
    """
    from pydial.estimation.spec import USES_CALIBRATION

    anchored = spec.anchored_cov_type if spec.method in USES_CALIBRATION else None
    cov_type = spec.resolved_cov_type
    C = block_covariances(est.linearization, data, cov_type, anchored, spec.cluster_correction)
    tables = covariance_tables(C, data.items, data.judges, spec.level, spec.ties, s=est.s, b=est.b, gamma=est.gamma,
                               judge_scores=est.judge_scores, log_nu=est.log_nu, beta=est.beta,
                               beta_labels=est.beta_labels, covariates=data.covariates,
                               beta_free=None if est.beta is None else beta_support(data, est.beta_labels))
    judge_scores = None if est.judge_scores is None else pd.DataFrame(
        est.judge_scores, index=pd.Index(data.judges, name="judge"), columns=pd.Index(data.items, name="item"))
    stage_scores = None if est.stage_scores is None else pd.DataFrame(est.stage_scores,
                                                                      index=pd.Index(data.items, name="item"))
    used, excluded = judgment_counts(data, spec.ties, spec.method)
    n_human, n_llm = int(used.iloc[-1]), int(used.iloc[:-1].sum())
    st = est.stats if est.stats is not None else FitStats(np.nan, None)
    return DialResult(method=spec.method, rank=est.rank, calibration=est.calibration, engine=spec.engine,
                      cov_type=cov_type, level=spec.level, items=data.items, judges=data.judges, n_human=n_human,
                      n_llm=n_llm, nobs=n_human + n_llm, n_obs_by_judge=used, excluded=excluded, llf=st.llf,
                      df_model=st.df_model, llf_human=st.llf_human, objective=st.objective, tie_log_nu=est.log_nu,
                      **tables, judge_scores=judge_scores, structure=est.structure,
                      calibration_coef=est.calibration_coef, lambda_=est.lambda_, converged=est.converged,
                      grad_norm=est.grad_norm, loss_human=est.loss_human, gacv=est.gacv,
                      calibration_test=est.calibration_test, path=est.path, fallback=est.fallback, chart=est.chart,
                      theta=est.theta, llm_chart=est.llm_chart, llm_theta=est.llm_theta, penalty=spec.penalty,
                      data=data, ties=spec.ties, cluster_correction=spec.cluster_correction,
                      anchored_cov_type=anchored, stage_scores=stage_scores, linearization=est.linearization,
                      fitter=fitter, spec=spec, covariate_scale=data.covariate_scale)


def with_verdict(res: DialResult, data: Comparisons, caught: list[Warning], *, seed: int = 0) -> DialResult:
    """Return ``res`` with :attr:`~DialResult.status` and :attr:`~DialResult.problems` from the warnings of the fit.

    Every :class:`ConvergenceWarning` / :class:`~pydial.exceptions.CovarianceWarning`
    raised while fitting is a problem; so is a position effect on the box bound.
    When there is a problem, the failing separation and human-MLE rows of
    :func:`pydial.check_design` are added as possible causes, naming the judges and
    items to blame.
    """
    res = dataclasses.replace(res, fit_warnings=tuple(caught))
    found: list[tuple[str, str]] = [(getattr(w, "status"), str(w)) for w in caught
                                     if isinstance(getattr(w, "status", None), str)]
    model = tuple(dict.fromkeys(str(w) for w in caught if isinstance(w, CalibrationWarning)))  # status stays
    if not res.converged and not any(st in ("not converged", "at bound", "not identified") for st, _ in found):
        found.append(("not converged", f"an optimization of the {res.method} fit is not a resolved optimum "
                                       f"(max|grad| = {res.grad_norm:.2e})"))
    pe = res.position_effects
    if pe is not None and len(pe):
        hit = pe.index[np.abs(pe["b"].to_numpy()) >= BOX * (1 - 1e-6)]
        for name in hit:
            side = "first" if pe.loc[name, "b"] > 0 else "second"
            found.append(("at bound", f"judge {name!r}: position effect b = {pe.loc[name, 'b']:+.4g} is on the box bound "
                                      f"|b| = {BOX:g}: the {side}-shown item (almost) always wins, so the judge's "
                                      "order-effect BTL has no finite MLE and b is not identified"))
    if not found:
        return dataclasses.replace(res, problems=model)
    rank, calibration = res.dial_model()
    try:
        rep = design_report(data, rank, calibration, res.method, seed, res.penalty)
        bad = rep.table[(~rep.table["ok"]) & rep.table["condition"].isin(["separation", "human-mle"])]
        causes = [f"possible cause, {str(j) if j == 'human' else 'judge ' + repr(str(j))}: {c}: {d}"
                  for j, c, d in bad[["judge", "condition", "detail"]].itertuples(index=False)]
    except (ValueError, DialError):  # the diagnosis must never hide the verdict
        causes = []
    status = min((st for st, _ in found), key=lambda st: STATUSES.index(st) if st in STATUSES else len(STATUSES))
    return dataclasses.replace(res, status=status,
                               problems=tuple(dict.fromkeys(msg for _, msg in found)) + tuple(causes) + model)


ANCHORED_METHODS: tuple[str, ...] = ("dial-anc", "pooled", "atc")
"""Methods whose scores assume the calibration restriction ``s_H = M c`` (and DIAL-Ada / -noPos at ``lambda = inf``)."""


def calibration_warning(res: DialResult) -> CalibrationWarning | None:
    """Return the :class:`~pydial.CalibrationWarning` of a fit whose calibration restriction its own test rejects.

    For the methods that assume ``s_H = M c`` (:data:`ANCHORED_METHODS`, and ``dial-ada`` /
    ``dial-nopos`` when they selected ``lambda = inf``) with a calibration test whose p-value is
    below ``1 - level``; ``None`` otherwise.
    """
    ct = res.calibration_test
    anchored = res.method in ANCHORED_METHODS or (res.method in ("dial-ada", "dial-nopos") and np.isinf(res.lambda_))
    if not anchored or ct is None or not ct.defined or not ct.p_value < 1 - res.level:
        return None
    basis = {"pooled": "the pooled LLM scores"}.get(res.method, "mu" if res.calibration in (None, "mu") else "W = [mu, V]")
    rule = "the endpoint-margin rule" if res.gacv is not None and res.gacv.attrs.get("selection") == "endpoint-margin" \
        else "GACV"
    advice = (f"{rule} selected the anchored endpoint lambda = inf nonetheless; compare method='human' or "
              "calibration='W'" if res.method in ("dial-ada", "dial-nopos") else
              "fit method='dial-ada', which chooses the LLM weight by GACV and falls back toward the people's "
              "own fit when the judges' consensus disagrees with them")
    return CalibrationWarning(
        f"the calibration restriction s_H = M c (M = {basis}) of method {res.method!r} is rejected by its "
        f"likelihood-ratio calibration test: T = {ct.statistic:.4g} on {ct.df} df, "
        f"p = {format_pvalue(ct.p_value)} < {1 - res.level:.2g}: the people's preferences are not those of the "
        f"judges' consensus up to scale, so these scores are biased toward the judges; {advice}")
