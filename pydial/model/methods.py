"""The estimators of :func:`pydial.fit` and what each uses: one table, read by the spec, the fit and the design check."""

from __future__ import annotations

ESTIMATORS: tuple[str, ...] = ("judges", "human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
"""The estimators of :func:`pydial.fit`."""
DEFAULT_METHOD = "dial-ada"
"""The estimator of :func:`pydial.fit` and :class:`~pydial.ModelSpec` when none is named: DIAL-Ada (GACV-chosen LLM weight)."""
NEEDS_HUMAN: tuple[str, ...] = ("human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
"""Methods that need human comparisons."""
USES_RANK: tuple[str, ...] = ("dial-nopos", "dial-anc", "dial-ada", "atc")
"""Methods that fit the structured LLM model, and so use ``rank`` (their memory grows with its chart)."""
DIAL_METHODS: tuple[str, ...] = ("dial-nopos", "dial-anc", "dial-ada")
"""The DIAL methods (:func:`pydial.estimation.dial.fit_dial`)."""
USES_CALIBRATION: tuple[str, ...] = DIAL_METHODS
"""Methods that use ``calibration`` and ``anchored_cov_type`` (AtC always calibrates along ``mu``)."""
ADAPTIVE: tuple[str, ...] = ("dial-ada", "dial-nopos")
"""Methods whose LLM weight ``lambda`` (and rank, for a grid) is selected on a path."""
LLM_ONLY: tuple[str, ...] = ("judges", "pooled")
"""Methods whose LLM fit ignores the low-rank structure."""
