"""Bundled data sets, in pydial's long format.

* :func:`arena` -- real data: 26,919 Chatbot Arena battles among 20 models, labelled by Chatbot Arena voters (judge
  ``"human"``) and three LLM judges (``gpt-4-0125-preview``, ``claude-3-opus-20240229``, ``gpt-3.5-turbo``).  Source:
  Networks-Learning/prediction-powered-ranking (commit af64521, folder data/), MIT License (``examples/LICENSE.arena``),
  converted by :func:`pydial.io.from_arena`; record ids are the battles' ``question_id``.  The LLM judges are assumed
  to have seen model_a first ("Assistant A"; the source does not store the display order).  The 26 rows the source
  holds twice are kept as separate judgments, reported by ``arena().summary()`` without a warning on every load;
  ``load("arena", duplicates="drop")`` drops them.
* :func:`synthetic` -- one draw of the paper's main simulation design (``pydial.simulate(n_llm=4000, n_human=300,
  seed=2026)``).
"""

from __future__ import annotations

import warnings
from importlib.resources import files
from pathlib import Path
from typing import Any

from pydial.data.comparisons import Comparisons
from pydial.exceptions import ArgumentError, DataWarning

NAMES: tuple[str, ...] = ("arena", "synthetic")

KNOWN_DUPLICATES: dict[str, int] = {"arena": 26, "synthetic": 0}
"""Rows of each bundled data set that are identical in all six columns (documented, so loaded without a warning)."""


def path(name: str) -> Path:
    """File of a bundled data set (``"arena"`` or ``"synthetic"``)."""
    if name not in NAMES:
        raise ArgumentError(f"unknown data set {name!r}; bundled: {NAMES}")
    return Path(str(files("pydial.examples") / f"{name}.csv.gz"))


def load(name: str, **kwargs: Any) -> Comparisons:
    """Load a bundled data set (:data:`NAMES`) with :meth:`pydial.Comparisons.from_csv` options ``kwargs``.

    Its documented duplicated rows (:data:`KNOWN_DUPLICATES`) raise no warning; an unknown ``name`` is an :class:`ArgumentError`.
    """
    file = path(name)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=rf"{KNOWN_DUPLICATES[name]} duplicated row\(s\)", category=DataWarning)
        return Comparisons.from_csv(file, **kwargs)


def arena() -> Comparisons:
    """Load the Chatbot Arena battles (real data; source and license in ``help(pydial.datasets)``)."""
    return load("arena")


def synthetic() -> Comparisons:
    """Load the bundled synthetic example (paper's main simulation design)."""
    return load("synthetic")
