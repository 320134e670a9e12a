r"""What is estimated: one immutable :class:`ModelSpec` of everything :func:`pydial.fit` is asked for, validated once.

The rank ``r`` and calibration basis are Cond. llm-structure's, the weights ``lambda`` eq. weighted-loss's.  Every
argument error is an :class:`~pydial.ArgumentError` naming the argument; :meth:`ModelSpec.check_data` checks the data.
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from pydial.data.comparisons import SELF_PREFERENCE, Comparisons, require_comparisons
from pydial.exceptions import (ArgumentError, ArgumentTypeError, ArgumentWarning, DataError, IdentifiabilityError,
                               caller_stacklevel)
from pydial.model.chart import CALIBRATIONS, DEFAULT_CALIBRATION, DEFAULT_RANK
from pydial.inference.meats import ANCHORED_COVS, COV_TYPES
from pydial.model.families import FAMILIES
from pydial.model.identifiability import design_report
from pydial.model.methods import ADAPTIVE, DEFAULT_METHOD, ESTIMATORS, NEEDS_HUMAN, USES_CALIBRATION, USES_RANK
from pydial.model.penalty import PENALTIES
from pydial.estimation.selection import GACV_TOLERANCE, SELECTION_RULES, Selection
from pydial.resources import check_choice, check_count, check_level, check_memory, check_seed

__all__ = ["ModelSpec", "DEFAULT_METHOD", "METHODS", "ENGINES", "ESTIMAND_FIELDS", "USES_RANK", "USES_CALIBRATION", "NEEDS_HUMAN",
           "rank_candidates", "check_choice", "check_level", "check_count", "check_seed"]

METHODS: tuple[str, ...] = ESTIMATORS
"""The estimators of :func:`pydial.fit` (what each uses: :mod:`pydial.model.methods`)."""
ENGINES: tuple[str, ...] = ("numpy", "stan")
"""The engines: numpy's Newton on exact derivatives, or Stan's optimizer."""
ESTIMAND_FIELDS: tuple[str, ...] = ("method", "rank", "calibration", "ties", "penalty", "lambda_", "covariate_effects")
"""The fields of a spec that say what is estimated (:meth:`ModelSpec.estimand`); the others say how."""


def _positive_grid(values: Any, name: str) -> tuple[float, ...] | None:
    """Return a non-empty 1-d sequence of finite positive numbers as a tuple (``lambda_=inf`` alone: the anchored endpoint)."""
    if values is None:
        return None
    hint = (f"{name} must be a non-empty sequence of finite positive numbers, e.g. {name}=[0.5, 2.0]"
            + (" (the endpoints 0 and inf are added by include_endpoints; inf alone is the anchored endpoint)"
               if name == "lambda_" else ""))
    if isinstance(values, (str, bytes, dict)):
        raise ArgumentTypeError(f"{hint}; got {values!r}")
    if isinstance(values, numbers.Real):
        values = [values]
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{hint}; got {values!r}") from None
    if name == "lambda_" and arr.shape == (1,) and arr[0] == np.inf:
        return (float("inf"),)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ArgumentError(f"{hint}; got {values!r}")
    return tuple(float(v) for v in arr)


def check_rank(rank: Any, method: str) -> int | str | tuple[int, ...]:
    """Return ``rank`` of ``method``: a non-negative integer, or for DIAL-Ada / -noPos a non-empty list of them or "auto"."""
    hint = f"rank must be a non-negative integer, a non-empty list of them, or 'auto', got {rank!r}"
    if isinstance(rank, str):
        if rank != "auto":
            raise ArgumentError(hint)
        grid: str | tuple[int, ...] = rank
    else:
        scalar = isinstance(rank, numbers.Real)
        try:
            values = [rank] if scalar else list(rank)
        except TypeError:
            raise ArgumentTypeError(hint) from None
        if not values or any(isinstance(r, bool) or not isinstance(r, numbers.Integral) for r in values):
            raise ArgumentTypeError(hint)
        if any(r < 0 for r in values):
            raise ArgumentError(hint)
        if scalar:
            return int(rank)
        grid = tuple(sorted({int(r) for r in values}))
    if method not in ADAPTIVE:  # a rank grid (a list or "auto") needs a method that selects the rank
        raise ArgumentError(f"a rank grid (rank={list(grid) if isinstance(grid, tuple) else grid!r}) needs method "
                            f"'dial-ada' or 'dial-nopos', got {method!r}")
    return grid


def rank_grid(rank: int | str | tuple[int, ...] | None, data: Comparisons) -> list[int]:
    """Candidate ranks: ``[rank]``, the list given, or for "auto" ``0``, ..., ``min(K-1, N-2, 3)``."""
    if rank is None:
        return [DEFAULT_RANK]
    if rank == "auto":
        return list(range(max(0, min(data.K - 1, data.N - 2, 3)) + 1))
    return [rank] if isinstance(rank, int) else [int(r) for r in rank]


def rank_candidates(rank: Any, data: Comparisons, method: str) -> list[int]:
    """Validate ``rank`` (int, list, or "auto") of ``method`` into its candidate ranks on ``data``."""
    return rank_grid(check_rank(rank, method), data)


SELECTION_HINT = ("selection must be 'gacv', ('endpoint-margin', c) with c >= 0, a dict with keys rule, margin, "
                  "tolerance, or a pydial.estimation.selection.Selection")


def _selection(value: Any, include_endpoints: bool | str) -> Selection:
    """Return ``selection``, the rule choosing the weight of ``dial-ada`` / ``dial-nopos``, as a :class:`Selection`."""
    if isinstance(value, str):
        value = {"rule": value}
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 2:
        value = dict(zip(("rule", "margin"), value))
    elif isinstance(value, Selection):
        value = {"rule": value.rule, "margin": value.margin, "tolerance": value.tolerance}
    if not isinstance(value, dict) or not set(value) <= {"rule", "margin", "tolerance"}:
        raise ArgumentTypeError(f"{SELECTION_HINT}; got {value!r}")
    rule = check_choice("selection rule", value.get("rule", "gacv"), SELECTION_RULES)
    margin = value.get("margin")
    if (margin is None) != (rule == "gacv"):
        raise ArgumentError(f"{SELECTION_HINT}: a margin c goes with the rule 'endpoint-margin' alone; got {value!r}")
    if rule == "endpoint-margin" and not include_endpoints:
        raise ArgumentError("selection=('endpoint-margin', c) chooses the anchored endpoint lambda = inf, which "
                            "include_endpoints=False excludes")
    tol = value.get("tolerance", GACV_TOLERANCE)
    return Selection(rule, None if margin is None else _non_negative(margin, "the selection margin c"),
                     _non_negative(tol, "the selection tolerance"))


def _non_negative(value: Any, name: str) -> float:
    """Return ``value`` as a finite float ``>= 0``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a finite number >= 0, got {value!r}")
    if not (np.isfinite(float(value)) and float(value) >= 0):
        raise ArgumentError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


_DEFAULT_SELECTION = Selection()  # GACV


def _method_in(methods: tuple[str, ...], doc: str) -> Any:
    """Return a read-only attribute of the spec: whether its method is one of ``methods``."""
    return property(lambda self: self.method in methods, doc=doc)


COVARIATE_EFFECTS: tuple[str, ...] = ("judge", "shared")
"""``covariate_effects``: one ``beta_k`` per LLM judge, or one ``beta_L`` shared by the LLM judges."""


@dataclass(frozen=True)
class ModelSpec:
    """An estimator and everything it is asked for, validated once (``pydial.fit``'s arguments).

    Parameters are those of :func:`pydial.fit`; ``rank`` and ``calibration`` left as None take their
    defaults (``1`` and ``"mu"``) for the methods that use them; given to a method that does not use
    them they are dropped with an :class:`~pydial.ArgumentWarning`.  A single weight is ``lambda_=[w]``
    with ``include_endpoints=False``; ``lambda_=inf`` alone is the anchored endpoint (``dial-ada`` there
    is ``dial-anc``, :meth:`estimand`).  :meth:`selected` gives the spec at a fit's selected weight and rank.
    """

    method: str = DEFAULT_METHOD
    rank: int | str | tuple[int, ...] | None = None
    calibration: str | None = None
    ties: str | None = None
    penalty: str | None = None
    lambda_: tuple[float, ...] | None = None
    multiples: tuple[float, ...] | None = None
    include_endpoints: bool | str = True
    cov_type: str | None = None
    anchored_cov_type: str = "two-step"
    cluster_correction: bool = False
    level: float = 0.95
    engine: str = "numpy"
    seed: int | None = None
    check: bool = True
    covariate_effects: str = "judge"
    selection: Selection = _DEFAULT_SELECTION

    def __post_init__(self) -> None:
        """Validate every argument (see the class docstring); fill in the defaults."""
        set_ = object.__setattr__
        check_choice("method", self.method, METHODS)
        for name, users in (("rank", USES_RANK), ("calibration", USES_CALIBRATION)):
            if getattr(self, name) is not None and self.method not in users:
                warnings.warn(ArgumentWarning(f"{name}={getattr(self, name)!r} is ignored: method {self.method!r} does "
                                              f"not use {name} (only {', '.join(users)} do)"), stacklevel=caller_stacklevel())
                set_(self, name, None)
        if self.method in USES_RANK:
            set_(self, "rank", check_rank(DEFAULT_RANK if self.rank is None else self.rank, self.method))
        if self.method in USES_CALIBRATION:
            set_(self, "calibration", check_choice("calibration", DEFAULT_CALIBRATION if self.calibration is None
                                                   else self.calibration, CALIBRATIONS))
        check_choice("ties", self.ties, tuple(FAMILIES))
        check_choice("penalty", self.penalty, PENALTIES)
        set_(self, "lambda_", _positive_grid(self.lambda_, "lambda_"))
        set_(self, "multiples", _positive_grid(self.multiples, "multiples"))
        check_choice("include_endpoints", self.include_endpoints, (True, False, "anchored"))
        if self.cov_type is not None:
            check_choice("cov_type", self.cov_type, COV_TYPES)
        check_choice("anchored_cov_type", self.anchored_cov_type, ANCHORED_COVS)
        check_choice("cluster_correction", self.cluster_correction, (True, False))
        set_(self, "cluster_correction", bool(self.cluster_correction))
        set_(self, "level", check_level(self.level))
        check_choice("engine", self.engine, ENGINES)
        set_(self, "seed", check_seed(self.seed))
        check_choice("check", self.check, (True, False))
        check_choice("covariate_effects", self.covariate_effects, COVARIATE_EFFECTS)
        if self.selection is not _DEFAULT_SELECTION:  # the default is valid for every method
            sel = _selection(self.selection, self.include_endpoints)
            if sel != _DEFAULT_SELECTION and not self.adaptive:
                warnings.warn(ArgumentWarning(f"selection={self.selection!r} is ignored: method {self.method!r} has "
                                              "no weight path (only dial-ada, dial-nopos do)"), stacklevel=caller_stacklevel())
                sel = _DEFAULT_SELECTION
            set_(self, "selection", sel)

    @property
    def order(self) -> bool:
        """Whether the judges' position effects ``b`` are estimated (all methods but ``dial-nopos``)."""
        return self.method != "dial-nopos"

    adaptive = _method_in(ADAPTIVE, "Whether the weight ``lambda`` is selected by GACV (``dial-ada``, ``dial-nopos``).")
    uses_rank = _method_in(USES_RANK, "Whether the method fits the structured LLM model (``rank``; "
                                      ":data:`~pydial.model.methods.USES_RANK`).")
    uses_calibration = _method_in(USES_CALIBRATION, "Whether the method calibrates a DIAL model (``calibration``, "
                                                    "``anchored_cov_type``).")
    needs_human = _method_in(NEEDS_HUMAN, "Whether the method needs human comparisons.")

    @property
    def resolved_cov_type(self) -> str:
        """The meat used: ``cov_type``, or ``"fisher"`` for ``human`` and ``"cell"`` otherwise."""
        if self.cov_type is not None:
            return self.cov_type
        return "fisher" if self.method == "human" else "cell"

    def replace(self, **changes: Any) -> "ModelSpec":
        """Return a copy with ``changes`` (validated again).

        Raises
        ------
        ArgumentTypeError
            A keyword is not a field of the spec (also a :class:`TypeError`, as Python's own is);
            the message names it and the accepted ones.
        """
        fields = [f.name for f in dataclasses.fields(self)]
        unknown = [k for k in changes if k not in fields]
        if unknown:
            raise ArgumentTypeError(f"ModelSpec.replace() got unknown keyword argument(s) "
                                    f"{', '.join(map(repr, unknown))}; it accepts {', '.join(fields)}")
        return dataclasses.replace(self, **changes)

    def arguments(self) -> dict[str, Any]:
        """Return the keyword arguments of :func:`pydial.fit` that rebuild this spec."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}  # the grids as lists

    @property
    def weight(self) -> float:
        """The single weight ``lambda`` of the spec: ``inf`` for ``dial-anc``, ``lambda_`` when it holds one, else nan."""
        if self.method == "dial-anc":
            return float("inf")
        return self.lambda_[0] if self.adaptive and self.lambda_ is not None and len(self.lambda_) == 1 else float("nan")

    def selected(self, lambda_: float, rank: int | None) -> "ModelSpec":
        """Return the spec of this estimator at the weight ``lambda_`` and rank ``rank`` a fit selected.

        The single weight ``lambda_=[w]`` with ``include_endpoints=False``; ``dial-ada`` at ``lambda = 0`` is ``human``.
        """
        spec = self.replace(rank=rank) if self.uses_rank and rank is not None and rank != self.rank else self
        if not spec.adaptive or np.isnan(lambda_):
            return spec
        if lambda_ == 0.0 and spec.method == "dial-ada":
            return spec.replace(method="human", rank=None, calibration=None, lambda_=None, multiples=None,
                                include_endpoints=True, selection=Selection())
        return spec.replace(lambda_=[float(lambda_)], multiples=None, include_endpoints=False, selection=Selection())

    def estimand(self) -> dict[str, Any]:
        """Return what this spec estimates, as the fields of :data:`ESTIMAND_FIELDS` in one canonical form.

        ``dial-ada`` at the single weight ``inf`` is ``dial-anc``; a DIAL method's weight is :attr:`weight` (a grid
        stays a grid); ``human`` and ``judges`` have ``covariate_effects="judge"``.
        """
        method, lam = self.method, (self.weight if self.lambda_ is None or len(self.lambda_) == 1 else self.lambda_)
        if method == "dial-ada" and lam == float("inf"):
            method = "dial-anc"
        dial = method.startswith("dial")
        return {"method": method, "rank": self.rank, "calibration": self.calibration, "ties": self.ties,
                "penalty": self.penalty, "lambda_": lam if dial else None,
                "covariate_effects": self.covariate_effects if method not in ("human", "judges") else "judge"}

    def to_record(self) -> dict[str, Any]:
        """Return the spec as a JSON-ready dict of its fields (:meth:`from_record` rebuilds it)."""
        out = self.arguments()
        out["selection"] = dataclasses.asdict(self.selection)
        return out

    @classmethod
    def from_record(cls, record: Any) -> "ModelSpec":
        """Rebuild a spec from :meth:`to_record`'s dict (validated again).

        Raises
        ------
        ArgumentTypeError
            ``record`` is not a dict, or has a key that is not a field of the spec (named).
        """
        if not isinstance(record, dict):
            raise ArgumentTypeError(f"a spec record must be a dict of ModelSpec fields, got {type(record).__name__}")
        return spec_from_arguments(record.get("method", DEFAULT_METHOD),
                                   {k: v for k, v in record.items() if k != "method"}, caller="ModelSpec.from_record")

    def rank_grid(self, data: Comparisons) -> list[int]:
        """Candidate ranks: ``[rank]``, the list given, or for "auto" ``0``, ..., ``min(K-1, N-2, 3)``."""
        return rank_grid(self.rank, data)

    def check_data(self, data: Comparisons) -> list[int]:
        """Check what needs the data, before any fit; return the candidate ranks.

        Raises :class:`~pydial.DataError` when the data lack the human comparisons or LLM judgments the method
        needs, or the record ids of ``cov_type="record"``; :class:`~pydial.MemoryLimitError` when the fit would not
        fit in memory; :class:`~pydial.IdentifiabilityError` (with ``check``) when the design cannot identify the model.
        """
        require_comparisons(data)
        method = self.method
        if self.needs_human and data.n_human == 0:
            raise DataError(
                f"method {method!r} needs human comparisons, but no decisive rows have judge == {data.human_judge!r} "
                f"(the other judges: {', '.join(repr(j) for j in data.judges[:8])}{', ...' if data.K > 8 else ''}; "
                "name the human judge with human_judge= / --human)"
            )
        if self.resolved_cov_type == "record" and data.aggregated:
            raise DataError("cov_type='record' clusters the comparisons by record id, but these data were built from "
                            "aggregated counts (Comparisons.from_counts / read_comparisons) and carry no record ids; use "
                            "cov_type='cell', 'binomial' or 'fisher', or load the rows with their record ids "
                            "(Comparisons.from_frame / from_csv)")
        if method != "human" and data.K == 0:
            raise DataError(f"method {method!r} needs LLM judgments, but there are none")
        if method == "judges" and SELF_PREFERENCE in data.covariates:  # constant within a judge's pairs
            raise IdentifiabilityError(
                f"method 'judges' cannot fit the self-preference covariate (judges {sorted(data.self_preference or ())}): "
                "it is constant within each of a judge's pairs (1[i own] - 1[j own] = the difference of the own-item "
                "indicator o_k), so beta_k moves the judge's own items' scores by the same amount as s_k + beta_k o_k: it "
                "is confounded with the judge's own scores. It is identified only through the low-rank structure: fit "
                "'dial-anc' or 'dial-ada' (or drop self_preference=)")
        grid = self.rank_grid(data)
        if self.uses_rank:
            check_memory(len(data.llm) + len(data.human), (max(grid) + 1) * (data.K + data.N + 1) + data.K,
                         f"method {method!r}")
        if self.check:
            calibration = self.calibration or DEFAULT_CALIBRATION
            for r in grid:
                design_report(data, r, calibration, method, self.seed, self.penalty,
                              shared=self.covariate_effects == "shared").raise_if_failed()
        return grid


def spec_from_arguments(method: str, arguments: dict[str, Any], *, caller: str = "fit") -> ModelSpec:
    """Build a :class:`ModelSpec` from ``fit``'s keyword arguments; an unknown keyword is an :class:`ArgumentTypeError`."""
    accepted = {f.name for f in dataclasses.fields(ModelSpec)} - {"method"}
    for name in arguments:
        if name not in accepted:
            raise ArgumentTypeError(f"{caller}() got an unexpected keyword argument {name!r}")
    return ModelSpec(method, **arguments)
