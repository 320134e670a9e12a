"""Exception and warning classes of pydial: every error that bad input or an impossible design can trigger."""

from __future__ import annotations

import difflib
import os
import sys
import types
from typing import Iterable


class DialError(Exception):
    """Base class of pydial's errors."""


class DataError(DialError, ValueError):
    """The comparison data are malformed; the message names the offending rows, columns, values or judges."""


class ArgumentError(DialError, ValueError):
    """An argument has an invalid value (also a :class:`ValueError`), raised before any work; the message names it."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a pydial function has the wrong type (also a :class:`TypeError`)."""


class UnknownNameError(ArgumentError, KeyError):
    """An argument names an item, judge or covariate the data or result lacks (a :class:`KeyError`); lists the known ones."""

    def __str__(self) -> str:
        """Return the message as given (not quoted, as :class:`KeyError` would)."""
        return Exception.__str__(self)

    @classmethod
    def check(cls, argument: str, kind: str, given: Iterable[object], known: Iterable[object], *,
              hint: str = "") -> None:
        """Raise an :class:`UnknownNameError` when a name in ``given`` is not in ``known``.

        Parameters
        ----------
        argument : str
            The argument that holds the names, e.g. ``"item_i"``.
        kind : str
            What the names are, e.g. ``"item"``, ``"judge"``.
        given : iterable
            The names given.
        known : iterable
            The names there are; the message lists them (the first 20) and the closest spellings.
        hint : str, optional
            Appended to the message, e.g. where the known names come from.
        """
        known = list(known)
        pool = set(known)
        unknown = [g for g in given if g not in pool]
        if not unknown:
            return
        shown = ", ".join(repr(k) for k in known[:20]) + (f", ... ({len(known)} in all)" if len(known) > 20 else "")
        folded = {str(k).casefold(): str(k) for k in known}
        first = str(unknown[0])
        close = ([first] if first in folded.values()  # the right text but another type, e.g. 7 for '7'
                 else [folded[c] for c in difflib.get_close_matches(first.casefold(), list(folded), n=3)])
        names = ", ".join(repr(u) for u in unknown)
        raise cls(f"{argument}: unknown {kind}{'s' if len(unknown) > 1 else ''} {names}"
                  + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else "")
                  + f"; the known {kind}s are {shown or '(none)'}{hint}")


class IdentifiabilityError(DialError):
    """The design cannot identify the requested model (:func:`pydial.check_design`).

    The message names the judge (or ``"human"``) and the paper's condition that fails, e.g. ``ident-LLM``.
    """


class ConvergenceError(DialError, RuntimeError):
    """An optimizer did not reach a stationary point within its budget."""


class OutputError(DialError, OSError):
    """An output location cannot be written (a file or folder in the way, no permission, a foreign non-empty folder)."""


class EstimandMismatchError(DialError, ValueError):
    """Two results that are compared estimate different things (e.g. a fit and a posterior of another model or weight).

    ``mismatch`` maps each differing field to ``(fit value, posterior value)``; the message says how to match them.
    """

    def __init__(self, message: str, mismatch: dict | None = None) -> None:
        super().__init__(message)
        self.mismatch = dict(mismatch or {})


class DependencyError(DialError, ImportError):
    """A dependency is missing or of an unsupported version; the message names the versions and how to install one."""


class DialWarning(UserWarning):
    """Base class of pydial's warnings."""


class ConvergenceWarning(DialWarning):
    """A fit finished but is not a resolved optimum; ``status`` (:data:`pydial.estimation.verdict.STATUSES`) says how.

    :func:`pydial.fit` copies ``status`` (e.g. ``"not converged"``, ``"at bound"``) into ``DialResult.status``.
    """

    def __init__(self, message: str = "", status: str = "not converged") -> None:
        super().__init__(message)
        self.status = status


class CovarianceWarning(DialWarning):
    """A covariance is degenerate (too few clusters, or zero variance): the affected intervals are NaN."""

    status = "degenerate covariance"


class CalibrationWarning(DialWarning):
    """The fit's calibration restriction ``s_H = M c`` is rejected by its own likelihood-ratio test.

    The status of such a fit (``dial-anc``, ``pooled``, ``atc``, DIAL-Ada at ``lambda = inf``) stays ``"ok"``; the
    problem is listed in ``DialResult.problems``.  ``method="dial-ada"`` moves toward the people's own fit instead.
    """


class BootstrapWarning(DialWarning):
    """The resamples cannot show the sampling variability of (part of) the data (e.g. a single record).

    The bootstrap standard errors and intervals are then NaN instead of 0; the message says which records and why.
    """


class ArgumentWarning(DialWarning):
    """An argument was given that the requested method does not use (e.g. ``rank`` for ``method="human"``); it is ignored."""


class DataWarning(DialWarning):
    """The data were read, but something was changed or is worth a look (e.g. names stripped, duplicated rows)."""


class MemoryLimitError(DialError, MemoryError):
    """A request would not fit in the memory available (estimated before allocating); the message says how to reduce it."""


def caller_stacklevel() -> int:
    """Return the ``stacklevel`` that attributes a warning raised in pydial to the user's line calling into it."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep

    def inside(code: "types.CodeType") -> bool:  # pydial's own code, or the __init__ that dataclasses generate for it
        name = code.co_filename
        return os.path.abspath(name).startswith(package) or (name.startswith("<") and code.co_name == "__init__")

    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and inside(frame.f_code):
        frame, level = frame.f_back, level + 1
    return level

