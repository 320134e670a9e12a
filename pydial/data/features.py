r"""Style features of response texts, the covariates of style-controlled comparisons.

LLM judges prefer the longer, more formatted answer more than people do; leaderboards
therefore report scores controlled for response style (LMArena adds normalized
differences of response length and markdown counts to its Bradley-Terry model).
:func:`style` computes the usual features of one response text, or of a column of them:

============== =============================================================================
feature        what is counted
============== =============================================================================
``chars``      characters of the text
``words``      whitespace-separated words of the text
``headers``    markdown headers: lines ``#`` .. ``######`` followed by a space
``list_items`` list items: lines starting (after indentation) with ``-``, ``*`` or ``+``
               and a space, or a number, ``.`` or ``)`` and a space
``bold``       bold spans: ``**text**`` or ``__text__`` on one line
============== =============================================================================

The markdown counts leave fenced code blocks out (between lines opening with three
backticks or three tildes): a ``# comment`` in code is not a header.  Characters and words count the
whole text.  The features of the two responses of a comparison become its covariate
columns ``<feature>_a`` and ``<feature>_b`` with ``suffix``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from pydial.exceptions import DataError

__all__ = ["FEATURES", "style"]

FEATURES: tuple[str, ...] = ("chars", "words", "headers", "list_items", "bold")
"""The features of :func:`style`, in its column order."""

_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~).*?^[ \t]{0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_HEADER = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_LIST = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)[^\n]*?\S\*\*|__(?=\S)[^\n]*?\S__")


def _features(text: str) -> tuple[int, int, int, int, int]:
    """``(chars, words, headers, list_items, bold)`` of one text."""
    prose = _FENCE.sub("", text)
    return (len(text), len(text.split()), len(_HEADER.findall(prose)), len(_LIST.findall(prose)),
            len(_BOLD.findall(prose)))


def style(text: str | Iterable[str] | pd.Series, *, suffix: str = "") -> pd.Series | pd.DataFrame:
    """Compute the style features of a response text, or of each text of a column (see the module docstring).

    Parameters
    ----------
    text : str, iterable of str or pandas.Series
        One response, or the responses of one side of the comparisons (e.g. ``df["response_a"]``).
    suffix : str
        Appended to the feature names, e.g. ``"_a"`` for the covariate columns of the first response.

    Returns
    -------
    pandas.Series or pandas.DataFrame
        The features of one text (a Series named by feature), or one row per text with the
        features as integer columns, indexed like ``text`` when it is a Series.

    Raises
    ------
    DataError
        A missing (None/NaN) or non-string text, naming its rows.
    """
    if isinstance(text, str):
        return pd.Series(_features(text), index=[f + suffix for f in FEATURES], name="style")
    texts = text if isinstance(text, pd.Series) else pd.Series(list(text))
    bad = [str(label) for label, t in texts.items() if not isinstance(t, str)]
    if bad:
        shown = ", ".join(bad[:6]) + (", ..." if len(bad) > 6 else "")
        raise DataError(f"style features need a text for every response; {len(bad)} row(s) are missing or not "
                        f"strings: rows {shown}")
    rows = [_features(t) for t in texts]
    return pd.DataFrame(rows, index=texts.index, columns=[f + suffix for f in FEATURES], dtype="int64")
