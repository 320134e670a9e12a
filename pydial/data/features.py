r"""Style features of response texts, the covariates of style-controlled comparisons.

Beyond the paper: LLM judges prefer the longer, more formatted answer more than people do, so leaderboards control
scores for response style (as LMArena's Bradley-Terry model does).  :func:`style` computes the usual features:

============== =======================================================================================================
feature        what is counted
============== =======================================================================================================
``chars``      characters of the text
``words``      whitespace-separated words of the text
``headers``    markdown headers: lines ``#`` .. ``######`` followed by a space
``list_items`` lines starting (after indentation) with ``-``, ``*`` or ``+``, or a number and ``.`` or ``)``, and a space
``bold``       bold spans: ``**text**`` or ``__text__`` on one line
============== =======================================================================================================

The markdown counts leave fenced code blocks out (between lines opening with three backticks or three tildes);
characters and words count the whole text.  :func:`comparison_covariates` turns the two sides' features (columns
``<feature>_a``, ``<feature>_b``) into the comparison covariate ``z``, divided by its root mean square (not centered:
``z`` changes sign with the pair's orientation, as the score difference does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from pydial.data.ingest import fail_rows
from pydial.exceptions import ArgumentError, DataError

__all__ = ["FEATURES", "TRANSFORMS", "comparison_covariates", "style"]

TRANSFORMS: tuple[str, ...] = ("difference", "normalized")
"""The comparison covariates of :func:`comparison_covariates`: ``x_a - x_b`` or ``(x_a - x_b) / (x_a + x_b)``."""

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
    """Compute the style features of a response text, or of each text of a column (see ``help(pydial.features)``).

    Parameters
    ----------
    text : str, iterable of str or pandas.Series
        One response, or the responses of one side of the comparisons (e.g. ``df["response_a"]``).
    suffix : str
        Appended to the feature names, e.g. ``"_a"`` for the covariate columns of the first response.

    Returns
    -------
    pandas.Series or pandas.DataFrame
        The features of one text (a Series named by feature), or one row per text with the features as integer
        columns, indexed like ``text`` when it is a Series.

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
    return pd.DataFrame([_features(t) for t in texts], index=texts.index, columns=[f + suffix for f in FEATURES], dtype="int64")


def _side(df: pd.DataFrame, column: str) -> np.ndarray:
    """Return the numeric values of one side's column (a DataError names missing, non-numeric or infinite cells)."""
    raw = df[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(float)
    fail_rows(f"missing values in covariate column {column!r}", df.index, raw.isna().to_numpy())
    fail_rows(f"non-numeric values in covariate column {column!r}", df.index, np.isnan(values))
    fail_rows(f"infinite values in covariate column {column!r}", df.index, np.isinf(values))
    return values


def comparison_values(df: pd.DataFrame, covariates: Sequence[str], *, transform: str = "difference") -> np.ndarray:
    """Return the validated comparison covariates ``x_a - x_b`` (or normalized) of ``df`` for the checked names ``covariates``."""
    if transform not in TRANSFORMS:
        raise ArgumentError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
    missing = [f"{c}{side}" for c in covariates for side in ("_a", "_b") if f"{c}{side}" not in df.columns]
    if missing:
        raise DataError(f"missing covariate column(s) {missing}: each covariate needs a column per response "
                        f"(<name>_a, <name>_b); the table has columns {list(df.columns)}")
    out = np.empty((len(df), len(covariates)))
    for t, c in enumerate(covariates):
        xa, xb = _side(df, f"{c}_a"), _side(df, f"{c}_b")
        if transform == "normalized":
            fail_rows(f"negative values in covariate {c!r} (the normalized difference needs x >= 0)", df.index,
                      (xa < 0) | (xb < 0))
            m = np.maximum(xa, xb)  # (xa - xb) / (xa + xb) of xa / m and xb / m: no overflow at any size
            ua, ub = (np.divide(x, m, out=np.zeros_like(x), where=m > 0) for x in (xa, xb))
            d = np.divide(ua - ub, ua + ub, out=np.zeros_like(ua), where=ua + ub > 0)
        else:
            with np.errstate(over="ignore"):
                d = xa - xb
            fail_rows(f"covariate {c!r}: x_a - x_b overflows (|x| near the largest float, {np.finfo(float).max:.3g}; "
                      "a missing-value marker?) in columns "f"{c}_a, {c}_b", df.index, np.isinf(d))
        out[:, t] = d
    return out


def covariate_names(covariates: str | Sequence[str]) -> list[str]:
    """Return the covariate names as a list of distinct strings (an :class:`ArgumentError` otherwise)."""
    names = [str(c) for c in ([covariates] if isinstance(covariates, str) else covariates)]
    if not names or len(set(names)) < len(names):
        raise ArgumentError(f"covariates must be distinct names, at least one, got {list(names)!r}")
    return names


def standardize(values: np.ndarray, names: Sequence[str], *, weights: np.ndarray | None = None,
                transform: str = "difference") -> tuple[np.ndarray, pd.Series]:
    """Divide each comparison covariate by its root mean square over the judgments (``weights``: judgments per row).

    Returns the values and the scales; a constant covariate is a :class:`DataError`.  The moments are those of
    ``d / max |d|`` scaled back, so they neither overflow nor underflow at any size.
    """
    w = np.ones(values.shape[0]) if weights is None else np.asarray(weights, float)
    total = w.sum()
    scale = {}
    out = np.empty_like(values, dtype=float)
    for t, c in enumerate(names):
        d = values[:, t]
        top = float(np.max(np.abs(d), initial=0.0))
        u = d / top if top > 0 else np.zeros_like(d)
        mean = float(w @ u / total) if total > 0 else 0.0
        sd = float(np.sqrt(w @ (u - mean) ** 2 / total)) if total > 0 else 0.0
        if not (np.isfinite(top) and sd > 1e-12):
            raise DataError(f"covariate {c!r} is constant ({transform} {d[0] if d.size else 0.0:g} in every "
                            "comparison): its effect is not identified; drop it")
        rms = float(np.sqrt(w @ u ** 2 / total))  # in (0, 1]: the root mean square of d is top * rms
        out[:, t], scale[c] = u / rms, top * rms
    return out, pd.Series(scale, name="scale", dtype=float).rename_axis("covariate")


def comparison_covariates(df: pd.DataFrame, covariates: Sequence[str], *,
                          transform: str = "difference") -> tuple[pd.DataFrame, pd.Series]:
    """Form the standardized comparison covariates from the per-side columns (see ``help(pydial.features)``).

    Beyond the paper: ``z`` enters the linear predictor of eq. binomial-model-llm / binomial-model-human as
    ``+ z' beta`` (style control, as in LMArena's Bradley-Terry model).

    Parameters
    ----------
    df : pandas.DataFrame
        One row per judgment, with the columns ``<name>_a`` and ``<name>_b`` of every covariate.
    covariates : sequence of str
        The covariate names, e.g. ``["words", "list_items"]`` (:func:`style` gives these features).
    transform : {"difference", "normalized"}
        ``x_a - x_b``, or ``(x_a - x_b) / (x_a + x_b)`` (0 when both are 0; the features must be non-negative).

    Returns
    -------
    z : pandas.DataFrame
        One column per covariate, indexed like ``df``: the comparison covariate divided by its scale.
    scale : pandas.Series
        The root mean square (standard deviation about 0) of each comparison covariate before the division.

    Raises
    ------
    DataError
        A missing column; missing, non-numeric or infinite values (naming the column and rows); negative values
        under ``"normalized"``; a constant covariate, whose effect is not identified.
    ArgumentError
        An unknown ``transform``, no covariate or a repeated name.
    """
    names = covariate_names(covariates)
    z, scale = standardize(comparison_values(df, names, transform=transform), names, transform=transform)
    return pd.DataFrame(z, index=df.index, columns=names), scale
