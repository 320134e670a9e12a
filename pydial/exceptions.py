"""Exception and warning classes of pydial.

Every error a user can trigger with bad input or an impossible design is one of
these, so that scripts can catch them specifically.
"""

from __future__ import annotations


class DialError(Exception):
    """Base class of pydial's errors."""


class DataError(DialError, ValueError):
    """The comparison data are malformed.

    The message names the offending rows, columns, values or judges.
    """


class IdentifiabilityError(DialError):
    """The design cannot identify the requested model.

    The message names the judge (or ``"human"``) and the condition of the paper
    that fails, e.g. Prop. ident-LLM or Cond. human-design.
    """


class ConvergenceError(DialError, RuntimeError):
    """An optimizer did not reach a stationary point within its budget."""


class DialWarning(UserWarning):
    """Base class of pydial's warnings."""


class ConvergenceWarning(DialWarning):
    """A fit finished but did not meet the convergence tolerance."""


class MemoryLimitError(DialError, MemoryError):
    """A request would not fit in the memory available (estimated before allocating).

    The message gives the estimate, what it is made of, and how to reduce it.
    """
