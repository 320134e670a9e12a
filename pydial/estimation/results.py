"""The result object of :func:`pydial.fit`: a frozen record of a fit, and the inference derived from it.

An estimator returns an :class:`Estimate` (no covariance); :class:`pydial.estimation.model.DialModel` forms the
covariances from its linearizations (:mod:`pydial.inference.wald`) and builds the :class:`DialResult` once.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np
import pandas as pd
from scipy.special import chdtrc, expit

from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.data.names import name_list
from pydial.estimation.fitstats import EXCLUDED, FitStats, judgment_counts
from pydial.estimation.verdict import dial_model, verdict
from pydial.exceptions import ArgumentError, CovarianceWarning, UnknownNameError
from pydial.inference.linearization import ANCHORED_COVS, COV_TYPES, Linearization, wald_frame
from pydial.inference.wald import covariances, tables, variance_warnings
from pydial.model.chart import Structure
from pydial.model.families import family_of
from pydial.resources import check_level

if TYPE_CHECKING:
    from pydial.estimation.spec import ModelSpec


def _read(of: str, name: str, doc: str) -> Any:
    """Return a read-only attribute of the result: the field ``name`` of ``self.<of>`` (of ``"tables"``: that table)."""
    if of == "tables":
        return property(lambda self: self.tables[name], doc=doc)
    return property(lambda self: getattr(attrgetter(of)(self), name), doc=doc)


@dataclass(frozen=True, eq=False)
class DialResult:
    r"""Result of :func:`fit`.

    Frozen, built once by :meth:`pydial.estimation.model.DialModel.fit` from the model (data and
    :class:`~pydial.ModelSpec`), the estimator's :class:`Estimate`, the covariances of its linearization
    and the verdict.  The tables are formed when first asked (:mod:`pydial.inference.wald`);
    :meth:`with_cov` returns the result of another meat.

    Attributes
    ----------
    model, estimate : DialModel, Estimate
        The data and specification (:class:`pydial.estimation.model.DialModel`); the point estimates and
        their linearizations.
    method, engine, level, penalty, ties, cluster_correction
        ``spec.method``, ``spec.engine``, ...: the level of every interval, ``"firth"`` for bias-reduced
        likelihoods (:mod:`pydial.model.penalty`), the tie model (``"davidson"``, ``"rao-kupper"`` or
        ``None``), whether the clustered meats carry the factor ``G/(G-1)``.
    cov_type, anchored_cov_type : str, str or None
        The meat (``spec.cov_type``, default ``"fisher"`` for ``human``, else ``"cell"``); :func:`pydial.fit`'s
        ``anchored_cov_type`` for the DIAL methods (see :attr:`anchored_cov`).
    rank, calibration : int, str or None
        Disagreement rank of the structured LLM fit (the selected one for a rank grid) and calibration
        basis (``"mu"`` or ``"W"``); ``None`` for ``human``, ``judges`` and ``pooled`` (:meth:`dial_model`).
    scores, cov : DataFrame
        By item: ``score, se, ci_low, ci_high`` of the centered human-target scores (for ``"judges"`` the
        mean of the position-debiased judge scores); their covariance (item x item).
    position_effects, position_effects_cov : DataFrame or None
        By judge: ``b, se, ci_low, ci_high, z, p_value`` (Wald test of ``b_k = 0``) of the structured LLM-only
        fit (DIAL methods, AtC) or of each judge's own fit (``judges``); their covariance (:meth:`position_test`).
    judge_scores, judge_scores_se : DataFrame or None
        Judge x item position-debiased scores ``S`` (LLM-only structured fit, or each judge's own fit);
        for ``judges`` their standard errors.
    structure : Structure or None
        ``mu, gamma, U, V`` of the LLM-only structured fit (``S = gamma mu^T + U V^T``).
    calibration_coef : ndarray or None
        ``c_H`` relative to the normalized basis ``M`` (``N^{-1} M^T M = I``; for ``pooled`` the normalized
        pooled score).
    lambda_ : float
        Calibration weight: ``inf`` for the anchored endpoint (and ``pooled``, ``atc``), 0 for ``human``,
        NaN for ``judges``.
    converged, grad_norm : bool, float
        Every optimization reached its gradient tolerance inside the box; the largest max-norm gradient
        (numpy: of the normalized loss; Stan: relative to the log density).
    loss_human : float
        :math:`\ell_H` at the reported scores (NaN without human data).
    gacv, path : DataFrame or None, tuple of PathEntry
        The weight path of ``dial-ada`` / ``dial-nopos`` (``lambda, multiple, gacv, l_H, trace, admissible,
        reason``, and ``rank`` for a rank grid); its fitted candidates and DIAL-Anc's endpoint
        (:class:`pydial.estimation.selection.PathEntry`), in the table's order.
    fallback : bool
        No weight passed the guards: the anchored endpoint is reported (with a :class:`ConvergenceWarning`).
    chart, theta, llm_chart, llm_theta : Chart, ndarray or None
        The structured DIAL fit reported (:class:`pydial.model.chart.Chart` and coordinates; with ties the
        structural part of ``(theta, log nu)``), and the LLM-only fit behind ``b``, ``gamma`` and ``S``.
    calibration_test : CalibrationTest or None
        Likelihood-ratio test of the calibration restriction ``s_H = M c``.
    consensus, tie_parameters : DataFrame or None
        Consensus loadings ``gamma_k`` with intervals (LLM-only fit); by judge, Davidson's ``nu`` or the
        Rao-Kupper threshold ``tau`` (:attr:`~pydial.model.families.Family.label`) with intervals.
    covariate_effects, covariate_effects_cov : DataFrame or None
        With response covariates: ``beta`` of ``logit p = ... + z' beta`` by ``(judge, covariate)``, per
        standard deviation of the covariate, with ``se, ci_low, ci_high, z, p_value``; their covariance.
        The scores are those of a comparison with ``z = 0``; see :meth:`covariate_test`.
    covariate_scale : Series or None
        The standard deviation of each comparison covariate (``Comparisons.covariate_scale``).
    n_human, n_llm, nobs : int
        The human and LLM judgments in the likelihood (with ties for a tie family; 0 for a side the method
        does not use) and their sum.
    n_obs_by_judge, excluded, counts : Series, DataFrame, tuple
        The judgments used and left out, by judge (LLM judges, then the human judge) and reason (``ties``,
        ``both_bad``, ``self_comparisons``, ``not_used_by_method``): together every judgment of the data;
        ``counts`` holds them (:func:`pydial.estimation.fitstats.judgment_counts`).
    llf, df_model, aic, bic, llf_human : float, int or None
        Log-likelihood of the judgments used at the estimate (:mod:`pydial.estimation.fitstats`; the staged
        fits' sum of stage log-likelihoods; NaN for ``atc``), free parameters after the gauge (``None`` for
        ``atc``), ``-2 llf + 2 df_model``, ``-2 llf + log(nobs) df_model``; the people's log-likelihood.
    objective : float
        ``dial-ada`` / ``dial-nopos``: the criterion ``Q_lambda = l_H + lambda l_L`` minimized, **not a
        log-likelihood**; NaN at ``lambda = inf`` and for the other methods.
    status, problems : str, tuple of str
        ``"ok"`` or one of :data:`~pydial.estimation.verdict.STATUSES` (not a resolved fit or invalid
        intervals; the command line exits 4 unless ``--allow-nonconverged``); what went wrong, naming the
        judges and items.  A rejected calibration (:class:`~pydial.CalibrationWarning`) is a problem of an
        ``"ok"`` fit.
    data, spec : Comparisons, ModelSpec
        ``model.data`` (not a copy; :func:`pydial.plan` takes pilot data from here) and ``model.spec``
        (``pydial.fit(other_data, spec=result.spec)`` refits).
    stage_scores : DataFrame or None
        By item, the scores of a two-stage baseline: ``pooled`` (before the rescaling); ``anchored``
        (before the isotonic step) and ``human`` (the order) for ``atc``.
    linearization, fit_warnings : tuple
        The factored influence of every target with a covariance (:class:`pydial.inference.linearization.Linearization`,
        for :meth:`with_cov` and :meth:`cov_params`); the warnings raised while fitting (behind :attr:`status`).
    """

    model: Any  # the DialModel (pydial.estimation.model): data and spec
    estimate: Estimate
    covariances: dict[str, Any]
    status: str = "ok"
    problems: tuple[str, ...] = ()
    fit_warnings: tuple[Warning, ...] = ()
    counts: tuple[pd.Index, np.ndarray, np.ndarray] | None = None  # judges, judgments used, left out (judgment_counts)

    method = _read("model.spec", "method", "``spec.method``.")
    engine = _read("model.spec", "engine", "``spec.engine``.")
    level = _read("model.spec", "level", "``spec.level``.")
    penalty = _read("model.spec", "penalty", "``spec.penalty``.")
    ties = _read("model.spec", "ties", "``spec.ties``.")
    cluster_correction = _read("model.spec", "cluster_correction", "``spec.cluster_correction``.")
    lambda_ = _read("estimate", "lambda_", "The calibration weight of the fit.")
    rank = _read("estimate", "rank", "The (selected) disagreement rank; None for a method without one.")
    calibration = _read("estimate", "calibration", "The calibration basis; None for a method without one.")
    converged = _read("estimate", "converged", "Every optimization reached its gradient tolerance.")
    grad_norm = _read("estimate", "grad_norm", "Largest max-norm gradient at the reported optima.")
    loss_human = _read("estimate", "loss_human", "The human loss at the reported scores.")
    structure = _read("estimate", "structure", "``mu, gamma, U, V`` of the LLM-only structured fit.")
    calibration_coef = _read("estimate", "calibration_coef", "``c_H`` relative to the normalized basis.")
    gacv = _read("estimate", "gacv", "The weight path of DIAL-Ada / -noPos.")
    calibration_test = _read("estimate", "calibration_test", "Likelihood-ratio test of the calibration restriction.")
    path = _read("estimate", "path", "The fitted candidates behind :attr:`gacv`.")
    fallback = _read("estimate", "fallback", "Whether the anchored endpoint was reported as the fallback.")
    chart = _read("estimate", "chart", "The chart of the structured DIAL fit reported.")
    theta = _read("estimate", "theta", "The coordinates of the structured DIAL fit reported.")
    llm_chart = _read("estimate", "llm_chart", "The chart of the LLM-only structured fit.")
    llm_theta = _read("estimate", "llm_theta", "The coordinates of the LLM-only structured fit.")
    linearization = _read("estimate", "linearization", "The factored influence of every target with a covariance.")
    tie_log_nu = _read("estimate", "log_nu", "The log tie parameters by group (``-inf``: no ties).")
    scores = _read("tables", "scores", "The scores with their Wald intervals, by item.")
    cov = _read("tables", "cov", "The covariance of the scores.")
    position_effects = _read("tables", "position_effects", "The position effects with their Wald tests, by judge.")
    position_effects_cov = _read("tables", "position_effects_cov", "The covariance of the position effects.")
    consensus = _read("tables", "consensus", "The consensus loadings with their intervals, by judge.")
    judge_scores_se = _read("tables", "judge_scores_se", "The standard errors of the judge scores (``judges``).")
    tie_parameters = _read("tables", "tie_parameters", "The tie parameters with their intervals, by judge.")
    covariate_effects = _read("tables", "covariate_effects", "The covariate effects with their Wald tests.")
    covariate_effects_cov = _read("tables", "covariate_effects_cov", "The covariance of the covariate effects.")

    @cached_property
    def tables(self) -> dict[str, Any]:
        """The tables :data:`~pydial.inference.wald.TABLES`, formed when first asked (their zero variances warned at build)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CovarianceWarning)
            return tables(self.estimate, self.covariances, self.data, self.level, self.ties)

    spec = _read("model", "spec", "The specification the result was fitted from (``model.spec``).")
    data = _read("model", "data", "The data the fit was made on (``model.data``).")

    @property
    def fitter(self) -> Any:
        """The function that refits this result's spec on other data: ``fitter(data, spec=...)`` (:func:`pydial.fit`)."""
        return type(self.model).fit_spec

    cov_type = _read("model.spec", "resolved_cov_type", "The meat of the covariances (``spec.cov_type`` or its default).")

    @property
    def anchored_cov_type(self) -> str | None:
        """``spec.anchored_cov_type`` for the DIAL methods, ``None`` for the others."""
        return self._meat(self.spec)[1]

    items = _read("model.data", "items", "The items, in the data's order.")
    judges = _read("model.data", "judges", "The LLM judges, in the data's order.")

    @cached_property
    def n_obs_by_judge(self) -> pd.Series | None:
        """The judgments used, by judge (the LLM judges, then the human judge), formed when first asked."""
        return None if self.counts is None else pd.Series(self.counts[1], index=self.counts[0], name="nobs", copy=True)

    @cached_property
    def excluded(self) -> pd.DataFrame | None:
        """The judgments left out, by judge and reason (:data:`~pydial.estimation.fitstats.EXCLUDED`), formed when first asked."""
        return None if self.counts is None else pd.DataFrame(self.counts[2], index=self.counts[0], columns=EXCLUDED, copy=True)

    @property
    def n_human(self) -> int:
        """The human judgments the fit's likelihood used."""
        return 0 if self.counts is None else int(self.counts[1][-1])

    @property
    def n_llm(self) -> int:
        """The LLM judgments the fit's likelihood used."""
        return 0 if self.counts is None else int(self.counts[1][:-1].sum())

    @property
    def nobs(self) -> int:
        """``n_human + n_llm``."""
        return self.n_human + self.n_llm

    llf = _read("estimate.stats", "llf", "Log-likelihood of the judgments used at the estimate (NaN without a likelihood).")
    df_model = _read("estimate.stats", "df_model", "Free parameters after the gauge; ``None`` for ``atc``.")
    llf_human = _read("estimate.stats", "llf_human", "The people's log-likelihood at the reported scores.")
    objective = _read("estimate.stats", "objective", "The weighted criterion ``Q_lambda`` at the estimate (DIAL-Ada / -noPos).")
    covariate_scale = _read("model.data", "covariate_scale", "The standard deviation of each comparison covariate, by name.")

    @cached_property
    def judge_scores(self) -> pd.DataFrame | None:
        """Judge x item position-debiased scores ``S``."""
        S = self.estimate.judge_scores
        return None if S is None else pd.DataFrame(S, index=pd.Index(self.judges, name="judge"),
                                                   columns=pd.Index(self.items, name="item"))

    @cached_property
    def stage_scores(self) -> pd.DataFrame | None:
        """The score vectors behind a two-stage baseline, by item."""
        st = self.estimate.stage_scores
        return None if st is None else pd.DataFrame(st, index=pd.Index(self.items, name="item"))

    @property
    def aic(self) -> float:
        """Akaike's criterion ``-2 llf + 2 df_model`` (NaN without a likelihood)."""
        return np.nan if self.df_model is None else -2.0 * self.llf + 2.0 * self.df_model

    @property
    def bic(self) -> float:
        """Schwarz's criterion ``-2 llf + log(nobs) df_model`` (NaN without a likelihood)."""
        return np.nan if self.df_model is None else -2.0 * self.llf + np.log(self.nobs) * self.df_model

    @property
    def fit_arguments(self) -> dict[str, Any]:
        """The keyword arguments of :func:`pydial.fit` that made this result (:meth:`ModelSpec.arguments`)."""
        return self.spec.arguments()

    @property
    def ok(self) -> bool:
        """``True`` when :attr:`status` is ``"ok"``."""
        return self.status == "ok"

    @property
    def anchored_cov(self) -> str | None:
        """``anchored_cov_type`` (``"two-step"``, ``"fixed-basis"``) when a DIAL fit selected ``lambda = inf``, else ``None``."""
        return self.anchored_cov_type if np.isinf(self.lambda_) else None

    def used_the_judgments_of(self, data: Comparisons) -> bool:
        """Return whether ``data`` hold the items and, judge by judge, the judgments this fit used (e.g. :func:`pydial.plan`)."""
        if tuple(data.items) != tuple(self.items) or self.counts is None:
            return tuple(data.items) == tuple(self.items)
        names, used, _ = judgment_counts(data, family_of(self.ties), self.method)
        return names.equals(self.counts[0]) and bool(np.array_equal(used, self.counts[1]))

    def _other_data(self, data: Comparisons) -> str:
        """Say how ``data`` differ from the data of this fit (for :meth:`used_the_judgments_of` failures)."""
        for what, theirs, ours in (("items", data.items, self.items), ("judges", data.judges, self.judges)):
            if tuple(theirs) != tuple(ours):
                return f"these data have the {what} {list(theirs)[:8]}, the fit {list(ours)[:8]}"
        return (f"these data hold other judgments (n_H {data.n_human}, n_LLM {data.n_llm}; the fit used n_H "
                f"{self.n_human}, n_LLM {self.n_llm})")

    def dial_model(self) -> tuple[int, str]:
        """``(rank, calibration)`` of the DIAL model of this fit, e.g. the one :func:`pydial.plan` builds on a pilot fit.

        The fitted ones, or :func:`pydial.fit`'s defaults (1, ``"mu"``) for ``human``, ``judges`` and ``pooled``.
        """
        return dial_model(self.estimate)

    def verdict(self) -> str:
        """One line: the status and its problems (``"ok, but: ..."`` for a rejected calibration restriction)."""
        if not self.problems:
            return self.status
        return (f"{self.status}: " if not self.ok else "ok, but: ") + "; ".join(self.problems)

    # ------------------------------------------------------------- inference
    def contrast(self, item_i: str, item_j: str, level: float | None = None) -> pd.Series:
        """Wald interval of ``s_i - s_j`` and (by the delta method) of the win probability ``sigma(s_i - s_j)``.

        ``level`` (default: the fit's) must be in (0, 1), as for :meth:`conf_int`.

        Raises
        ------
        UnknownNameError
            ``item_i`` or ``item_j`` is not an item of the fit (the message lists the items).
        """
        level = self.level if level is None else check_level(level)
        for argument, it in (("item_i", item_i), ("item_j", item_j)):
            UnknownNameError.check(argument, "item", [it], self.scores.index)
        w = self._contrasts([item_i], [item_j], level).iloc[0]
        est, se = float(w["estimate"]), float(w["se"])
        p = float(expit(est))
        return pd.Series({"estimate": est, "se": se, "ci_low": float(w["ci_low"]), "ci_high": float(w["ci_high"]),
                          "p_value": float(w["p_value"]) if se > 0 else np.nan, "win_prob": p, "win_prob_se": p * (1 - p) * se,
                          "win_prob_ci_low": float(expit(w["ci_low"])), "win_prob_ci_high": float(expit(w["ci_high"])),
                          "level": level}, name=f"{item_i} - {item_j}")

    def _contrasts(self, first: list[str], second: list[str], level: float) -> pd.DataFrame:
        """Wald table of the contrasts ``s_first - s_second`` (elementwise), from the score covariance."""
        return _differences(self.scores["score"], self.cov, first, second, level, "estimate",
                            [f"{i} - {j}" for i, j in zip(first, second)])

    def cov_params(self, cov_type: str | None = None, what: str = "scores", *, anchored_cov_type: str | None = None,
                   cluster_correction: bool | None = None) -> pd.DataFrame:
        """Covariance of the estimates as a labelled DataFrame, of any meat, without refitting.

        The empirical sandwich with the meat ``cov_type``, formed from :attr:`linearization`; ``"fixed-basis"``
        is the ``M H_M^{-1} M^T`` limit as ``lambda -> inf``.

        Parameters
        ----------
        cov_type : {"fisher", "binomial", "cell", "record", "two-step", "fixed-basis"}, optional
            The meat (:mod:`pydial.inference.linearization`), default the fit's :attr:`cov_type`; ``"two-step"``
            and ``"fixed-basis"`` keep it and choose the covariance at the anchored endpoint (DIAL fits at inf).
        what : {"scores", "b", "gamma"}
            The scores (item x item), the position effects or the consensus loadings (judge x judge).
        anchored_cov_type : {"two-step", "fixed-basis"}, optional
            Default the fit's.
        cluster_correction : bool, optional
            Scale the clustered meats by ``G/(G-1)``; default the fit's (:attr:`cluster_correction`).

        Returns
        -------
        DataFrame
            The fit's own covariance when nothing differs, else the one :meth:`with_cov` would report.
        """
        if what not in ("scores", "b", "gamma"):
            raise ArgumentError(f"what must be 'scores', 'b' or 'gamma', got {what!r}")
        settings = self._meat(self._cov_spec(cov_type, anchored_cov_type, cluster_correction))
        if what == "b" and self.position_effects is None:
            raise ArgumentError(f"method {self.method!r} has no position effects")
        if what == "gamma" and self.consensus is None:
            raise ArgumentError(f"method {self.method!r} has no consensus loadings")
        if settings == self._meat(self.spec) and what != "gamma":
            return self.cov if what == "scores" else cast(pd.DataFrame, self.position_effects_cov)
        if what != "scores" or self.method != "atc":  # AtC's scores have no covariance
            self._require_linearization()
        C = covariances(self.linearization, self.data, *settings, only=what).get(what)
        idx = self.cov.index if what == "scores" else pd.Index(list(self.judges), name="judge")
        return pd.DataFrame(np.full((len(idx), len(idx)), np.nan) if C is None else C, index=idx, columns=idx.copy())

    def with_cov(self, cov_type: str | None = None, *, anchored_cov_type: str | None = None,
                 cluster_correction: bool | None = None) -> "DialResult":
        """Return the same fit with every covariance, standard error and interval of another meat.

        The estimates are unchanged; the covariances are recomputed from :attr:`linearization` (statsmodels'
        ``get_robustcov_results``), equal to a refit with the same three settings.

        Parameters
        ----------
        cov_type : {"fisher", "binomial", "cell", "record", "two-step", "fixed-basis"}, optional
            As in :meth:`cov_params`; default the fit's.
        anchored_cov_type : {"two-step", "fixed-basis"}, optional
            The covariance at the anchored endpoint; default the fit's.
        cluster_correction : bool, optional
            Scale the clustered meats by ``G/(G-1)``; default the fit's.

        Returns
        -------
        DialResult
            A new result; :attr:`status` is re-derived (``"degenerate covariance"`` for a degenerate meat).
        """
        spec = self._cov_spec(cov_type, anchored_cov_type, cluster_correction)
        if self._meat(spec) == self._meat(self.spec):
            return dataclasses.replace(self)  # nothing to recompute: a copy
        self._require_linearization()
        model = dataclasses.replace(self.model, spec=spec)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            C = covariances_of(model, self.estimate)
        keep = [w for w in self.fit_warnings if not isinstance(w, CovarianceWarning)]
        return result_of(model, self.estimate, C, keep + reissue(caught))

    def _require_linearization(self) -> None:
        """Raise an :class:`~pydial.ArgumentError` unless this result can form other covariances."""
        if not self.linearization:
            raise ArgumentError(f"this {self.method!r} result carries no linearization; refit with "
                                "pydial.fit(..., cov_type=...)")

    def _cov_spec(self, cov_type: str | None, anchored_cov_type: str | None,
                  cluster_correction: bool | None) -> ModelSpec:
        """Return the spec with another meat: the fit's own settings for what is not given, validated by the spec."""
        cov = self.cov_type if cov_type is None else cov_type
        anchored = self.anchored_cov_type if anchored_cov_type is None else anchored_cov_type
        if cov in ANCHORED_COVS:  # the anchored covariance named as the meat: the fit's own meat with it
            if anchored_cov_type is not None and anchored_cov_type != cov:
                raise ArgumentError(f"cov_type={cov!r} and anchored_cov_type={anchored_cov_type!r} disagree")
            cov, anchored = self.cov_type, cov
        if cov in ("scores", "b", "gamma"):
            raise ArgumentError(f"cov_type must be one of {COV_TYPES + ANCHORED_COVS}, got {cov_type!r} (the target "
                                "is chosen by what=)")
        if anchored != self.anchored_cov_type and self.anchored_cov_type is None:
            raise ArgumentError(f"anchored_cov_type applies to the DIAL methods only, not {self.method!r}")
        corr = self.cluster_correction if cluster_correction is None else cluster_correction
        return self.spec.replace(cov_type=cov, cluster_correction=corr,
                                 **({} if anchored is None else {"anchored_cov_type": anchored}))

    @staticmethod
    def _meat(spec: ModelSpec) -> tuple[str, str | None, bool]:
        """``(cov_type, anchored_cov_type, cluster_correction)`` that a spec's covariances are formed with."""
        return spec.resolved_cov_type, spec.anchored_cov_type if spec.uses_calibration else None, spec.cluster_correction

    def conf_int(self, level: float | None = None, what: str = "scores", cov_type: str | None = None) -> pd.DataFrame:
        """Wald intervals at ``level`` from the fit's covariance (or another meat's), without refitting.

        Parameters
        ----------
        level : float, optional
            Confidence level (default: the fit's).
        what : {"scores", "b", "contrasts"}
            The scores, the position effects, or every contrast ``s_i - s_j`` (``i`` before ``j``; index ``"i - j"``).
        cov_type : str, optional
            Another meat (or anchored covariance) as in :meth:`cov_params`; default the fit's.

        Returns
        -------
        DataFrame
            ``estimate, se, ci_low, ci_high`` (NaN where the covariance has none, e.g. AtC).
        """
        level = self.level if level is None else check_level(level)
        if cov_type is not None:
            return self.with_cov(cov_type).conf_int(level, what)
        if what == "contrasts":
            iu, ju = np.triu_indices(len(self.scores), 1)
            tab = self._contrasts(list(self.scores.index[iu]), list(self.scores.index[ju]), level)
        elif what in ("scores", "b"):
            C_df = self.cov_params(what=what)  # raises for b without position effects
            est = (self.scores["score"] if what == "scores" else cast(pd.DataFrame, self.position_effects)["b"]).to_numpy()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                tab = wald_frame(est, np.diag(C_df.to_numpy()), list(C_df.index), level, "estimate")
        else:
            raise ArgumentError(f"what must be 'scores', 'b' or 'contrasts', got {what!r}")
        tab = tab[["estimate", "se", "ci_low", "ci_high"]]
        tab.attrs["level"] = level
        return tab

    def loo_cv(self, data: Comparisons) -> pd.DataFrame:
        """Exact leave-one-human-comparison-out loss ``CV_loo`` beside GACV, for every admissible candidate (Thm. gacv).

        For small problems: up to ``2 x`` (with ties ``3 x``) human cells refits per candidate.

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
        rows = []
        for e in self.path:
            c = e.candidate
            if c.admissible:
                theta = e.staged_theta if np.isinf(c.lambda_) or c.lambda_ == 0 else c.theta
                rows.append({"rank": e.chart.r, "lambda": c.lambda_, "gacv": c.gacv,
                             "cv_loo": loo_cv(data, e.chart, c.lambda_, theta, family_of(self.ties))})
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
        if self.position_effects is None:
            raise ArgumentError(f"method {self.method!r} has no position effects")
        for argument, j in (("judge_1", judge_1), ("judge_2", judge_2)):
            UnknownNameError.check(argument, "judge", [j], self.position_effects.index,
                                   hint=" (the judges with a position effect)")
        name = f"b[{judge_1}] - b[{judge_2}]"
        w = _differences(self.position_effects["b"], cast(pd.DataFrame, self.position_effects_cov), [judge_1], [judge_2],
                         self.level, "difference", [name]).iloc[0]
        return pd.Series({c: float(w[c]) for c in ("difference", "se", "z", "p_value")}, name=name)

    def covariate_test(self, judge: str, against: str | None = None, covariates: Sequence[str] | None = None
                       ) -> pd.Series:
        """Wald test that a judge's covariate effects are 0, or equal to another row's (e.g. the people's).

        The analogue of :meth:`position_test` for ``beta`` of ``logit p = ... + z' beta``: ``beta_k = 0``
        (``against=None``) or ``beta_k = beta_against`` over the ``covariates`` (default every one estimated for
        both rows), a chi-square test with one df per covariate from :attr:`covariate_effects_cov`.

        Returns
        -------
        pandas.Series
            ``difference`` (the first covariate's), ``chi2``, ``df``, ``p_value``; for one covariate ``se``, ``z``.

        Raises
        ------
        ArgumentError
            The fit has no covariate effects, ``against`` is ``judge``, or a covariate is named twice.
        ArgumentTypeError
            ``covariates`` is not a list of names (e.g. one string: pass ``["length"]``).
        UnknownNameError
            ``judge``, ``against`` or a covariate is unknown (the message lists the known ones), or
            an effect is fixed at 0.
        """
        ce, C = self.covariate_effects, self.covariate_effects_cov
        if ce is None or C is None:
            raise ArgumentError(f"this {self.method!r} fit has no covariate effects (fit data with covariates=)")
        rows = list(ce.index.unique("judge"))
        fitted = {*self.judges, self.data.human_judge}
        who = (judge,) if against is None else (judge, against)
        for argument, name in zip(("judge", "against"), who):
            if name in fitted and name not in rows:
                raise UnknownNameError(f"{argument}: no covariate effects for {name!r} in this {self.method!r} fit; "
                                       f"the rows with covariate effects are {', '.join(map(repr, rows))}")
            UnknownNameError.check(argument, "judge", [name], rows, hint=" (the rows with covariate effects)")
        if against == judge:
            raise ArgumentError(f"judge and against are both {judge!r}: against= names another row (a judge or the "
                                "human judge), or is None to test the effects against 0")
        pos = {key: t for t, key in enumerate(ce.index)}
        names = ([c for c in ce.index.unique("covariate") if all((w, c) in pos for w in who)] if covariates is None
                 else [str(c) for c in name_list(covariates, "covariates")])  # default: every one of both rows
        UnknownNameError.check("covariates", "covariate", names, ce.index.unique("covariate"))
        if len(set(names)) < len(names):  # a repeated row would make the covariance singular and count a df twice
            raise ArgumentError(f"covariates: {sorted({c for c in names if names.count(c) > 1})} given more than once")
        fixed = [(w, c) for w in who for c in names if (w, c) not in pos]
        if fixed:
            raise UnknownNameError(f"covariates: no estimated covariate effect {fixed}: the covariate is 0 on all of "
                                   "that row's comparisons, so its effect is a fixed 0 (e.g. the people's and the "
                                   "unmapped judges' self_preference); leave it out of covariates=")
        L = np.zeros((len(names), len(ce)))
        for w, sign in zip(who, (1.0, -1.0)):  # the rows of beta_judge (- beta_against)
            L[np.arange(len(names)), [pos[(w, c)] for c in names]] = sign
        d = L @ ce["beta"].to_numpy(float)
        V = L @ C.to_numpy(float) @ L.T
        chi2 = float(d @ np.linalg.solve(V, d))
        name = f"beta[{judge}]" + ("" if against is None else f" - beta[{against}]")
        out = {"difference": float(d[0]), "chi2": chi2, "df": len(names), "p_value": float(chdtrc(len(names), chi2))}
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
        """Post-selection intervals by refitting the whole procedure (GACV's ``lambda`` and ``r``) on ``B`` record resamples.

        See :func:`pydial.estimation.bootstrap.bootstrap`.
        """
        from pydial.estimation.bootstrap import bootstrap

        return bootstrap(self, B, by=by, seed=seed, n_jobs=n_jobs, level=level, progress=progress)

    # ---------------------------------------------------------------- report
    def summary(self) -> str:
        """Return a statsmodels-like text summary.

        The header gives ``rank``, ``calibration``, ``lambda`` (``n/a`` for ``judges``), ``cov_type`` and,
        at the anchored endpoint, ``anchored_cov`` (AtC: no standard errors); then the judgments used and
        left out, ``llf`` with ``df_model``, AIC, BIC, ``Q_lambda`` and the calibration test.  p-values are
        printed by :func:`pydial.formatting.format_pvalue` (never ``0``).
        """
        from pydial.estimation.summary import summary

        return summary(self)

    def __repr__(self) -> str:
        """Return a one-line description of the fit."""
        return (f"DialResult(method={self.method!r}, N={len(self.items)}, K={len(self.judges)}, "
                f"lambda={self.lambda_}, converged={self.converged}, status={self.status!r})")


@dataclass(frozen=True)
class Estimate:
    r"""What an estimator returns: the point estimates and their linearizations, no covariance.

    ``DialModel`` forms the covariances of ``s``, ``b``, ``gamma``, ``judge_scores`` and ``log_nu`` (``-inf``: no ties)
    from :attr:`linearization`; the other fields are :class:`DialResult`'s of the same name.
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


def _differences(est: pd.Series, C: pd.DataFrame, first: list[str], second: list[str], level: float, column: str,
                 names: list[str]) -> pd.DataFrame:
    """Wald table of ``est[first] - est[second]`` (elementwise) from the covariance ``C`` of ``est``."""
    a, b = est.index.get_indexer(first), est.index.get_indexer(second)
    Cv, e = C.to_numpy(), est.to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return wald_frame(e[a] - e[b], np.clip(Cv[a, a] + Cv[b, b] - 2 * Cv[a, b], 0.0, None), names, level, column)


def tie_log_nu(labels: list[str], log_nu: np.ndarray, free: np.ndarray | None = None) -> pd.Series:
    """Return :attr:`Estimate.log_nu` of the groups ``labels``: ``log_nu`` per label, or per ``free`` row; else ``-inf``."""
    out = np.full(len(labels), -np.inf)
    out[slice(None) if free is None else free] = log_nu
    return pd.Series(out, index=pd.Index(labels, name="judge"))


def covariances_of(model: Any, est: Estimate) -> dict[str, Any]:
    """Every covariance of ``est``'s linearization under the model's meat; warns of a degenerate meat or a zero variance."""
    C = covariances(est.linearization, model.data, *DialResult._meat(model.spec))
    for w in variance_warnings(est, C, model.data):
        warnings.warn(w, stacklevel=2)
    return C


def reissue(caught: list[warnings.WarningMessage]) -> list[Warning]:
    """Hand every recorded warning on to the caller's filters; return them (warnings.warn made each an instance)."""
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return [cast(Warning, w.message) for w in caught]


def result_of(model: Any, est: Estimate, C: dict[str, Any], caught: list[Warning]) -> DialResult:
    """Return the frozen result of an estimate and its covariances, with the verdict of the warnings ``caught``."""
    status, problems = verdict(model.spec, est, model.data, caught)
    return DialResult(model=model, estimate=est, covariances=C, status=status, problems=problems, fit_warnings=tuple(caught),
                      counts=judgment_counts(model.data, family_of(model.spec.ties), model.spec.method))
