"""Stan data and starting values of pydial's Stan programs.

The shared cells (:func:`schema_data`) plus each program's own entries, 1-based with ``i < j``
and ``a = +1`` when item ``i`` was shown first; Stan names follow the Python vocabulary.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence, cast

import numpy as np

from pydial.data.comparisons import CellTable, Comparisons, require_comparisons
from pydial.estimation.glm import initial_theta
from pydial.model.chart import Calibration, Chart, Structure, helmert_basis
from pydial.model.families import BINARY, Family, family_of, family_of_code, log_coef
from pydial.estimation.spec import ModelSpec, check_choice
from pydial.exceptions import ArgumentError, ArgumentTypeError

__all__ = ["data_fingerprint", "DIAL_PRIORS", "DIAL_SAMPLE_PRIORS", "JUDGES_PRIORS", "CellTable", "covariate_rows",
           "zero_beta", "helmert_basis", "llm_cell_table", "human_cell_table", "dial_data", "dial_calibrate_data",
           "dial_sample_data", "judges_data", "schema_data", "standata", "weighted_log_coef",
           "dial_sample_inits", "dial_sample_start", "mu_reference", "tie_start", "check_frame_sd", "FRAME_SD"]

CALIBRATION_CODE = {None: 0, "mu": 1, "W": 2}

DIAL_PRIORS: dict[str, float] = {"A_sd": 0.0, "B_sd": 0.0, "c_sd": 0.0, "b_sd": 0.0, "beta_sd": 0.0,
                                 "log_nu_mean": 0.0, "log_nu_sd": 0.0}
"""Normal priors of ``dial.stan`` (penalty on the chart blocks; 0 = flat, the MLE); key ``x`` is the datum ``prior_x``."""

FRAME_SD = 0.2
"""The default scale of ``dial_sample.stan``'s parameter expansion of ``P`` (``frame_sd``; posteriors match it to the data)."""

DIAL_SAMPLE_PRIORS: dict[str, float] = {"m_sd": 2.0, "gamma_sd": 1.0, "Z_sd": 2.0, "b_sd": 1.0, "beta_sd": 1.0, "c_sd": 2.0,
                                        "log_nu_mean": -1.0, "log_nu_sd": 1.5}
r"""Default priors of ``dial_sample.stan`` (``posterior(data, "dial-ada")``, all DIAL methods): the table the docstrings cite.

Normal priors on the program's parameters, as its header states them; ``priors=`` overrides entries, and a
scale of 0 makes a block flat (only where the likelihood identifies it).

=============== ======= ===================================================================
key             default prior, and what it implies for the model's quantities
=============== ======= ===================================================================
``m_sd``        2.0     ``m_raw ~ N(0, m_sd^2)``: the mean judge score ``S'1/K = gamma_bar mu`` in
                        Helmert coordinates, ``N(0, m_sd^2 (I - 11'/N))``: ``mu`` is uniform on its
                        sphere ``||mu||^2 = N``, ``gamma_bar = ||m_raw|| / sqrt(N)`` is ``m_sd
                        chi_{N-1} / sqrt(N)`` (vanishing at 0).
``gamma_sd``    1.0     ``gamma_dev ~ N(0, gamma_sd^2)``: the judges' loadings ``gamma``
                        around their mean ``gamma_bar`` (Helmert coordinates of ``R^K``).
``Z_sd``        2.0     ``Z_raw ~ N(0, Z_sd^2)``: the item side ``Z`` of the disagreement ``U V' =
                        P Z'``, isotropic on ``{1, mu}^perp``, the judge side ``P`` a uniform
                        orthonormal frame (parameter expansion): ``V = sqrt(N) frame(Z)`` is uniform,
                        ``U = P Z' V / N``; for rank 1 ``||U|| = ||Z|| / sqrt(N)``, i.e. ``Z_sd
                        chi_{N-2} / sqrt(N)``.  There is no prior on ``U`` itself.
``b_sd``        1.0     ``b_k ~ N(0, b_sd^2)``: the judges' order effects.
``beta_sd``     1.0     ``beta_g ~ N(0, beta_sd^2)``: the covariate effects, per root-mean-square
                        unit of the (standardized) covariate on the log-odds.
``c_sd``        2.0     ``c ~ N(0, c_sd^2)``: the calibration coordinates, ``s_H = M c`` with
                        ``M = mu`` or ``M = [mu, V]``.
``log_nu_mean`` -1.0    ``log nu ~ N(log_nu_mean, log_nu_sd^2)``: the tie parameters (each judge's,
``log_nu_sd``   1.5     then the people's; Rao-Kupper's threshold ``tau = nu``); the median tie rate
                        at equal scores is about 16% (Davidson, ``nu / (2 + nu)``), 18% (Rao-Kupper).
=============== ======= ===================================================================

``analyses/sbc`` checks by simulation-based calibration that the programs sample the posterior of exactly
these priors, and shows what they imply for win probabilities (prior predictive check).
"""

JUDGES_PRIORS: dict[str, float] = {"s_sd": 2.0, "b_sd": 1.0, "beta_sd": 1.0, "log_nu_mean": -1.0, "log_nu_sd": 1.5}
r"""Default priors of ``judges.stan`` for NUTS (``posterior(data, "judges" | "human")``); point fits use flat priors.

Normal priors on the program's parameters (its header states the same); ``priors=`` overrides entries; 0 is flat.

=============== ======= ===================================================================
key             default prior, and what it implies
=============== ======= ===================================================================
``s_sd``        2.0     ``s_raw, sH_raw ~ N(0, s_sd^2)`` in Helmert coordinates: each judge's and the
                        people's centered scores are ``N(0, s_sd^2 (I - 11'/N))``, a score
                        difference ``s_i - s_j`` is ``N(0, 2 s_sd^2)``.
``b_sd``        1.0     ``b_k ~ N(0, b_sd^2)``: the judges' order effects.
``beta_sd``     1.0     ``beta_g ~ N(0, beta_sd^2)``: each judge's and the people's covariate
                        effects, as in :data:`DIAL_SAMPLE_PRIORS`.
``log_nu_mean`` -1.0    ``log nu ~ N(log_nu_mean, log_nu_sd^2)``: the tie parameters, as in
``log_nu_sd``   1.5     :data:`DIAL_SAMPLE_PRIORS`.
=============== ======= ===================================================================
"""


def merge_priors(defaults: Mapping[str, float], priors: Mapping[str, float] | None, what: str) -> dict[str, float]:
    """Return the prior settings ``defaults`` of program ``what`` overridden by ``priors`` (names and scales checked)."""
    out = dict(defaults)
    if priors:
        unknown = sorted(set(priors) - set(defaults))
        if unknown:
            raise ArgumentError(f"unknown {what} prior(s) {unknown}; allowed: {sorted(defaults)}")
        for k, v in priors.items():
            v = float(v)
            if k.endswith("sd") and not (np.isfinite(v) and v >= 0):
                raise ArgumentError(f"prior scale {k!r} must be finite and >= 0 (0 = flat), got {v!r}")
            out[k] = v
    return out


# --------------------------------------------------------------------------- cells
def llm_cell_table(data: Comparisons, family: Family = BINARY) -> CellTable:
    """LLM cells of ``family``: decisive ones (binary) or with tie counts (:meth:`Comparisons.cell_table`)."""
    return data.cell_table("llm", with_ties=not family.is_binary)


def pooled_cell_table(data: Comparisons, family: Family = BINARY) -> CellTable:
    """Return the LLM cells of :func:`llm_cell_table` all given to one judge (index 0): the pooled BTL."""
    return data.cell_table("pooled", with_ties=not family.is_binary)


def human_cell_table(data: Comparisons, family: Family = BINARY) -> CellTable:
    """Human cells of ``family`` (judge index ``K``, ``a = 0``)."""
    return data.cell_table("human", with_ties=not family.is_binary)


def data_fingerprint(data: Comparisons) -> str:
    """Return a 16-hex-digit hash of the names and cells a model sees, whatever the row order (the estimand's ``data``)."""
    h = hashlib.sha256(json.dumps([[str(x) for x in data.items], [str(x) for x in data.judges],
                                   str(data.human_judge), [str(x) for x in data.covariates]]).encode())
    for which in ("llm", "human"):
        t = data.cell_table(which, with_ties=True)
        ints = np.stack([np.asarray(c, dtype=np.int64) for c in (t.judge, t.i, t.j, t.a, t.n, t.y, t.tie_counts)])
        h.update(which.encode() + ints.tobytes())
        if t.z is not None:
            h.update(np.ascontiguousarray(t.z, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def _weights(w: float | np.ndarray, m: int, what: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(w, dtype=float), (m,)).astype(float).copy()
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise ArgumentError(f"{what} weights must be finite and >= 0")
    return arr


STANDATA_PROGRAMS: tuple[str, ...] = ("dial", "dial_sample", "judges")


def _family(family: Family) -> Family:
    """Return ``family`` checked to be a :class:`~pydial.model.families.Family` (the Stan datum ``ties`` is its ``code``)."""
    if not isinstance(family, Family):
        raise ArgumentTypeError(f"family must be a pydial.model.families.Family (family_of(ties)), got {family!r}")
    return family


def _priors(p: Mapping[str, float]) -> dict[str, float]:
    """Return the Stan data of the prior settings ``p``: key ``x`` is ``prior_x`` in every program."""
    return {f"prior_{k}": float(v) for k, v in p.items()}


def schema_data(L: CellTable, H: CellTable | None, *, N: int, K: int, order: bool, family: Family,
                w_llm: float | np.ndarray = 1.0, w_human: float | np.ndarray = 1.0,
                log_lik: bool = True, boundary_nu: bool = False, covariates: bool = True,
                beta_row: Sequence[int] | np.ndarray | None = None, beta_fixed: np.ndarray | None = None) -> dict[str, Any]:
    """Return the shared first declarations of every program's data block (cells, weights, covariates, ``nu_zero``).

    ``L``: LLM cells of judges ``0..K-1``; ``H``: human cells or ``None``; the binary ``family`` needs decisive cells.
    ``boundary_nu``: groups without a tie get ``nu_zero = 1``.  ``beta_row``/``beta_fixed`` default to
    :func:`covariate_rows` and the entries whose covariate is 0 on all the row's cells.
    """
    H = CellTable.empty() if H is None else H
    code = _family(family).code
    assert L.tie_counts is not None and H.tie_counts is not None  # filled in by CellTable
    if code == 0 and (np.any(L.tie_counts > 0) or np.any(H.tie_counts > 0)):
        raise ArgumentError("cells with ties need a tie model (ties='davidson' or 'rao-kupper')")
    if len(L) and (L.judge.min() < 0 or L.judge.max() >= K):
        raise ArgumentError(f"LLM cell judges must lie in 0..{K - 1}")
    nu_zero = np.zeros(K + 1, np.int64)
    if code and boundary_nu:  # 1 for each group (judges 0..K-1, people K) without a tie
        nu_zero[:] = 1
        nu_zero[np.unique(L.judge[L.tie_counts > 0])] = 0
        nu_zero[K] = not (H.tie_counts > 0).any()
    return {"N": int(N), "K": int(K), "order": int(bool(order)), "ties": code,
            "C": len(L), "cell_judge": L.judge + 1, "cell_i": L.i + 1, "cell_j": L.j + 1, "cell_a": L.a,
            "cell_counts": L.counts, "cell_w": _weights(w_llm, len(L), "LLM"),
            "H": len(H), "human_i": H.i + 1, "human_j": H.j + 1, "human_counts": H.counts,
            "human_w": _weights(w_human, len(H), "human"),
            **_covariate_data(L, H, K, covariates, beta_row, beta_fixed),
            "nu_zero": nu_zero,
            "calc_log_lik": int(log_lik)}


def covariate_rows(K: int, *, people: bool, shared: bool = False) -> np.ndarray:
    """Return ``beta_row`` (1-based row of ``beta`` per group, 0 = none): judges (one row if ``shared``), then the people."""
    llm = np.ones(K, np.int64) if shared else np.arange(1, K + 1)
    return np.append(llm, int(np.max(llm, initial=0)) + 1 if people else 0)


def zero_beta(d: Mapping[str, Any]) -> np.ndarray:
    """Zero covariate effects as the programs' ``beta_free`` for the data ``d`` (the free entries of ``beta``)."""
    return np.zeros(int(np.size(d["beta_fixed"]) - np.sum(d["beta_fixed"])))


def _covariate_data(L: CellTable, H: CellTable, K: int, covariates: bool, beta_row: Sequence[int] | np.ndarray | None,
                    beta_fixed: np.ndarray | None) -> dict[str, Any]:
    """Return the covariate entries of the schema: ``n_cov``, ``cell_z``, ``human_z``, ``beta_row`` (``n_cov = 0``: none)."""
    P = max(L.p, H.p) if covariates else 0
    z = []
    for T, what in ((L, "LLM"), (H, "human")):
        if P and T.p != P and len(T):
            raise ArgumentError(f"the {what} cells carry {T.p} covariates, the others {P}")
        z.append(np.asarray(T.z, float) if P and T.z is not None and len(T) else np.zeros((len(T), P)))
    rows = (covariate_rows(K, people=len(H) > 0) if beta_row is None else np.asarray(beta_row, np.int64)) if P \
        else np.zeros(K + 1, np.int64)
    if rows.shape != (K + 1,) or np.min(rows) < 0:
        raise ArgumentError(f"beta_row must hold K + 1 = {K + 1} rows >= 0 (0 = none), got {rows!r}")
    n_beta = int(np.max(rows)) if P else 0
    if beta_fixed is None:  # an entry is fixed where its covariate is 0 on all the row's cells
        row_of = rows[np.concatenate([L.judge, np.full(len(H), K)]).astype(np.int64)]
        nonzero = np.vstack(z) != 0
        beta_fixed = np.array([~nonzero[row_of == r].any(axis=0) for r in range(1, n_beta + 1)], bool).reshape(n_beta, P)
    fixed = np.asarray(beta_fixed, bool).reshape(n_beta, P).astype(np.int64)
    return {"n_cov": P, "cell_z": z[0], "human_z": z[1], "beta_row": rows, "n_beta": n_beta, "beta_fixed": fixed}


def weighted_log_coef(d: Mapping[str, Any]) -> float:
    """Return the weighted sum of the cells' log multinomial coefficients (``log_prob`` minus it is the Objective's scale)."""
    return sum(float(np.dot(np.asarray(d[w], float).reshape(-1), log_coef(d[c])))
               for c, w in (("cell_counts", "cell_w"), ("human_counts", "human_w")))


# --------------------------------------------------------------------------- dial.stan
def dial_data(data: Comparisons, chart: Chart, *, w_llm: float | np.ndarray, w_human: float | np.ndarray = 0.0,
              priors: Mapping[str, float] | None = None, llm: CellTable | None = None, family: Family = BINARY,
              fix_llm: np.ndarray | None = None, log_lik: bool = False, firth: int = 0,
              boundary_nu: bool = False) -> dict[str, Any]:
    """Return the data of ``dial.stan`` for ``chart``.

    ``w_llm``/``w_human`` weight each cell's log-likelihood; ``llm`` replaces the LLM cells; ``fix_llm`` (a chart theta)
    fixes ``A, B`` and fits the calibration on the human cells; ``firth``: 0 none, 1 judge BTL, 2 calibration GLM.
    """
    people = chart.calibration is not None
    H = human_cell_table(data, family) if people else None
    p = merge_priors(DIAL_PRIORS, priors, "dial.stan")
    fixed = ~chart.beta_free.reshape(chart.beta_rows, chart.p)
    if fix_llm is not None:  # no LLM cells; the people's covariate row alone
        L, rows, fixed = CellTable.empty(), np.append(np.zeros(chart.K, np.int64), 1), fixed[-1:]
        th = np.asarray(fix_llm, float)
        A_fix, B_fix = th[chart.slices["A"]].reshape(-1, chart.q), th[chart.slices["B"]].reshape(-1, chart.q)
    else:
        L = llm if llm is not None else llm_cell_table(data, family)
        rows = covariate_rows(chart.K, people=people, shared=chart.shared)
        A_fix = B_fix = np.zeros((0, chart.q))
    d = schema_data(L, H, N=chart.N, K=chart.K, order=chart.order, family=family, w_llm=w_llm, w_human=w_human,
                    log_lik=log_lik, boundary_nu=boundary_nu, covariates=chart.p > 0, beta_row=rows, beta_fixed=fixed)
    return d | dict(rank=chart.r, calibration=CALIBRATION_CODE[chart.calibration], fix_llm=int(fix_llm is not None),
                    A_fix=A_fix, B_fix=B_fix, **_priors(p), firth=_firth_code(firth, allowed=(0, 1, 2)))


def _firth_code(firth: int | bool, allowed: tuple[int, ...]) -> int:
    """Return the Stan datum ``firth`` (``stan/include/firth.stan``), checked against the codes a program allows."""
    code = int(firth)
    if code not in allowed:
        raise ArgumentError(f"firth must be one of {list(allowed)} for this program, got {firth!r}")
    return code


# --------------------------------------------------------------------------- dial_sample.stan
def check_frame_sd(value: Any, name: str = "frame_sd") -> float:
    """Return ``value`` as the scale of ``dial_sample.stan``'s expansion of ``P``: a positive finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (np.isfinite(value) and value > 0):
        raise ArgumentError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def dial_sample_data(data: Comparisons, *, rank: int, calibration: str | None, order: bool = True, family: Family = BINARY,
                     w_llm: float | np.ndarray = 1.0, w_human: float | np.ndarray = 1.0,
                     priors: Mapping[str, float] | None = None, log_lik: bool = True, win_prob: bool = False,
                     mu_ref: np.ndarray | None = None, per_judgment: bool = False, shared: bool = False,
                     frame_sd: float = FRAME_SD) -> tuple[dict[str, Any], CellTable, CellTable | None]:
    """Return the data of ``dial_sample.stan`` and the (LLM, human) cell tables in ``log_lik`` order.

    ``per_judgment``: one cell per judgment; ``mu_ref``: reference direction of ``mu`` in Helmert coordinates
    (default from :func:`dial_sample_start`); ``shared``: one covariate row for all judges; ``frame_sd``: the
    scale of the parameter expansion of the judge frame ``P`` (sampling efficiency only: ``P`` is uniform for any).
    """
    L = llm_cell_table(data, _family(family))
    H = human_cell_table(data, family) if calibration is not None else None
    if per_judgment:
        L = L.per_judgment()
        H = H.per_judgment() if H is not None else None
    p = merge_priors(DIAL_SAMPLE_PRIORS, priors, "dial_sample.stan")
    if mu_ref is None:
        mu_ref = mu_reference(dial_sample_start(data, rank=rank, calibration=None, order=order)[0].mu)
    mu_ref = np.asarray(mu_ref, float).reshape(-1)
    frame_sd = check_frame_sd(frame_sd)
    if mu_ref.size != data.N - 1 or not np.linalg.norm(mu_ref) > 0:
        raise ArgumentError(f"mu_ref must be a nonzero vector of length N - 1 = {data.N - 1}")
    chart = Chart.for_data(data, rank, cast(Calibration | None, calibration), order, shared)
    d = schema_data(L, H, N=data.N, K=data.K, order=order, family=family, w_llm=w_llm, w_human=w_human, log_lik=log_lik,
                    beta_row=covariate_rows(data.K, people=H is not None, shared=shared),
                    beta_fixed=~chart.beta_free.reshape(chart.beta_rows, chart.p) if data.p else None)
    return d | dict(rank=rank, calibration=CALIBRATION_CODE[calibration], mu_ref=mu_ref, **_priors(p), frame_sd=frame_sd,
                    calc_win_prob=int(win_prob)), L, H


# --------------------------------------------------------------------------- judges.stan
def judges_data(L: CellTable, H: CellTable | None, *, N: int, K: int, order: bool = True, family: Family = BINARY,
                w_llm: float | np.ndarray = 1.0, w_human: float | np.ndarray = 1.0,
                priors: Mapping[str, float] | None = None, flat: bool = False, log_lik: bool = True,
                firth: bool = False) -> dict[str, Any]:
    """Return the data of ``judges.stan`` (``K = 0``: human BTL; ``flat``: MLE, priors ignored; ``firth``: Jeffreys prior)."""
    p = merge_priors(JUDGES_PRIORS, priors, "judges.stan")
    if flat:
        p = {k: (0.0 if k.endswith("sd") else v) for k, v in p.items()}
    d = schema_data(L, H, N=N, K=K, order=order, family=family, w_llm=w_llm, w_human=w_human, log_lik=log_lik)
    return d | _priors(p) | {"firth": _firth_code(firth, allowed=(0, 1))}


# --------------------------------------------------------------------------- dial_calibrate.stan
def dial_calibrate_data(H: CellTable, M: np.ndarray, *, family: Family = BINARY,
                        priors: Mapping[str, float] | None = None, log_lik: bool = True) -> dict[str, Any]:
    """Return the data of ``dial_calibrate.stan``: human cells ``H`` and bases ``M`` of shape ``(n_draws, N, d)``."""
    M = np.asarray(M, float)
    if M.ndim != 3 or M.shape[0] < 1 or M.shape[2] < 1:
        raise ArgumentError(f"M must have shape (n_draws, N, d) with n_draws, d >= 1, got {M.shape}")
    p = merge_priors(DIAL_SAMPLE_PRIORS, priors, "dial_sample.stan")
    d = schema_data(CellTable.empty(), H, N=M.shape[1], K=0, order=False, family=family, log_lik=log_lik)
    return d | {"n_draws": M.shape[0], "d": M.shape[2], "M": M,
                **_priors({k: p[k] for k in ("c_sd", "beta_sd", "log_nu_mean", "log_nu_sd")})}


def standata(data: Comparisons, program: str = "dial_sample", spec: ModelSpec | None = None, *,
             priors: Mapping[str, float] | None = None, include_human: bool = True,
             extra: Mapping[str, Any] | None = None, **keywords: Any) -> dict[str, Any]:
    r"""Return the Stan data dictionary of a pydial program for ``data`` (the shared schema plus the program's own).

    Every shipped program reads the same cells (:func:`schema_data`): ``N, K, order, ties`` (0 binary, 1
    Davidson-Beaver, 2 Rao-Kupper), the LLM cells ``cell_judge, cell_i, cell_j, cell_a`` (1-based, ``i < j``, ``a =
    +1`` when item ``i`` was shown first), ``cell_counts[C, 3]`` (wins of ``i``, of ``j``, ties) and weights
    ``cell_w``, the human cells ``human_i, human_j, human_counts[H, 3], human_w``, the response covariates (``n_cov,
    cell_z, human_z, beta_row, n_beta, beta_fixed``), ``nu_zero`` and ``calc_log_lik``; an extended program reads
    them plus its own entries (``extra``).

    Parameters
    ----------
    data : Comparisons
    program : {"dial", "dial_sample", "judges"}
        Whose program-specific entries (rank, calibration, priors) to add.
    spec : pydial.ModelSpec, optional
        The model: its ``rank``, ``calibration``, ``ties``, the order effects of its ``method`` (none for
        ``"dial-nopos"``), ``covariate_effects`` and one weight ``lambda_`` (LLM cells get weight ``lambda n_H /
        n_LLM``; default 1, the ordinary likelihood).  Default: ``ModelSpec(**keywords)``.
    priors : mapping, optional
        Overrides of the program's default priors.
    include_human : bool
        ``judges``: include the human cells.
    extra : mapping, optional
        More entries (data of an extended program), which may not replace schema entries.
    **keywords
        The keywords of :class:`pydial.ModelSpec` (``method``, ``rank``, ``calibration``, ``ties``,
        ``lambda_``, ...) when ``spec`` is not given.

    Returns
    -------
    dict
        Ready for :meth:`pydial.stan.CompiledModel.sample` / ``optimize`` on either backend.

    Raises
    ------
    pydial.ArgumentError
        An unknown program, both ``spec`` and keywords, a rank grid or several weights, or a DIAL program for a
        method without a rank.
    pydial.ArgumentTypeError
        ``spec`` is not a :class:`pydial.ModelSpec`.

    Examples
    --------
    >>> import pydial
    >>> from pydial.stan import standata
    >>> data = pydial.simulate(N=8, K=3, n_llm=400, n_human=40, seed=1).comparisons
    >>> d = standata(data, "dial", rank=1, ties=None)
    >>> d["N"], d["K"], d["rank"], d["calibration"]
    (8, 3, 1, 1)
    >>> standata(data, "judges", pydial.ModelSpec(method="dial-nopos"))["order"]
    0
    """
    data = require_comparisons(data)
    check_choice("program", program, STANDATA_PROGRAMS)
    if spec is None:
        spec = ModelSpec(**keywords)
    elif keywords:
        raise ArgumentError(f"pass either spec or its keywords, not both (got spec and {sorted(keywords)})")
    elif not isinstance(spec, ModelSpec):
        raise ArgumentTypeError(f"spec must be a pydial.ModelSpec, got {type(spec).__name__}")
    lambda_ = spec.lambda_ or (1.0,)
    if len(lambda_) != 1:
        raise ArgumentError(f"standata takes one weight lambda_, got {lambda_!r}")
    w_llm = float(lambda_[0]) * data.n_human / data.n_llm if spec.lambda_ else 1.0
    family, order, shared = family_of(spec.ties), spec.order, spec.covariate_effects == "shared"
    if program != "judges" and not isinstance(spec.rank, int):
        raise ArgumentError(f"program {program!r} needs one rank; method {spec.method!r} gives rank={spec.rank!r}")
    if program == "dial":
        ch = Chart.for_data(data, cast(int, spec.rank), spec.calibration, order, shared)
        d = dial_data(data, ch, w_llm=w_llm, w_human=1.0, priors=priors, family=family, log_lik=True)
    elif program == "dial_sample":
        d = dial_sample_data(data, rank=cast(int, spec.rank), calibration=spec.calibration, order=order, family=family,
                             w_llm=w_llm, priors=priors, shared=shared)[0]
    else:
        H = human_cell_table(data, family) if include_human and data.n_human > 0 else None
        d = judges_data(llm_cell_table(data, family), H, N=data.N, K=data.K, order=order, family=family,
                        w_llm=w_llm, priors=priors)
    return with_extra(d, extra)


def with_extra(d: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``d`` plus the entries of ``extra`` (data of an extended program), which may not replace any of ``d``."""
    if extra:
        clash = sorted(set(extra) & set(d))
        if clash:
            raise ArgumentError(f"extra data may not replace the schema entries {clash}")
        d = {**d, **extra}
    return d


# --------------------------------------------------------------------------- starting values
def dial_sample_start(data: Comparisons, *, rank: int, calibration: str | None,
                      order: bool = True) -> tuple[Structure, np.ndarray | None, np.ndarray | None]:
    """Return the point fits' start (:func:`pydial.estimation.glm.initial_theta`) as ``(structure, c, b)``."""
    chart = Chart(data.N, data.K, rank, cast(Calibration | None, calibration), order)
    theta = initial_theta(data, chart)
    c = chart.calibration_coordinates(theta) if calibration is not None else None
    return chart.structure(theta), c, chart.order_effects(theta) if order else None


def mu_reference(mu: np.ndarray) -> np.ndarray:
    """Return the reference direction ``mu_ref`` of ``dial_sample.stan``: ``mu`` in Helmert coordinates over ``sqrt(N)``."""
    mu = np.asarray(mu, float)
    return helmert_basis(mu.size).T @ mu / np.sqrt(mu.size)


def dial_sample_inits(data: Comparisons, d: Mapping[str, Any], *, chains: int, rng: np.random.Generator,
                      jitter: float = 0.1, start: tuple[Structure, np.ndarray | None, np.ndarray | None] | None = None
                      ) -> list[dict[str, Any]]:
    """Return per-chain initial values of ``dial_sample.stan``: ``start`` plus normal noise of sd ``jitter``."""
    N, K, r, order = int(d["N"]), int(d["K"]), int(d["rank"]), bool(d["order"])
    cal: Calibration | None = {0: None, 1: "mu", 2: "W"}[int(d["calibration"])]
    st, c, b = dial_sample_start(data, rank=r, calibration=cal, order=order) if start is None else start
    QN, QK = helmert_basis(N), helmert_basis(K)
    # U V' = P Z' with P an orthonormal frame of col(U): U = P T (QR), Z = V T'
    if r > 0:
        P, Tm = np.linalg.qr(st.U)
        sg = np.sign(np.diag(Tm))
        sg[sg == 0] = 1.0
        P, Z = P * sg, st.V @ (Tm * sg[:, None]).T
    else:
        P, Z = np.zeros((K, 0)), np.zeros((N, 0))
    # Z_raw: the coordinates of Zc orthogonal to mu_c (dial_sample.stan's reflection is its own inverse)
    mu_c, Zc, e = QN.T @ st.mu, QN.T @ Z, np.asarray(d["mu_ref"], float) / np.linalg.norm(np.asarray(d["mu_ref"], float))
    w = e + mu_c / np.linalg.norm(mu_c)
    center = {"m_raw": max(float(np.mean(st.gamma)), 1e-3) * mu_c,
              "Z_raw": householder_perp(e).T @ (Zc - (2.0 / (w @ w)) * np.outer(w, w @ Zc)),
              "gamma_dev": QK.T @ st.gamma, "P_raw": QK.T @ P,
              "b": np.asarray(b, float) if order else np.zeros(0),
              "c": np.atleast_1d(np.asarray(c, float)) if cal is not None else np.zeros(0),
              "log_nu": tie_start(d)}
    return [{k: v + jitter * rng.standard_normal(v.shape) for k, v in center.items()} for _ in range(chains)]


def tie_start(d: Mapping[str, Any]) -> np.ndarray:
    """Return the starting log tie parameters (judges, then people) of the Stan data ``d``."""
    code, K, H = int(d["ties"]), int(d["K"]), int(d["H"])
    if code == 0:
        return np.zeros(0)
    counts = np.vstack([np.asarray(d["cell_counts"]).reshape(-1, 3), np.asarray(d["human_counts"]).reshape(-1, 3)])
    judge = np.concatenate([np.asarray(d["cell_judge"], np.int64) - 1, np.full(H, K)])
    family = family_of_code(code)
    return np.asarray([family.log_nu_start(counts[judge == g]) for g in range(K + (1 if H else 0))], float)


def householder_perp(e: np.ndarray) -> np.ndarray:
    """Return ``E_perp`` of dial_sample.stan: columns 2.. of the Householder reflection taking ``e_1`` to ``e``."""
    w0 = -e.copy()
    w0[0] += 1.0
    H0 = np.eye(e.size)
    if w0 @ w0 > 1e-24:
        H0 -= 2.0 / (w0 @ w0) * np.outer(w0, w0)
    return H0[:, 1:]
