"""Bundled data sets, in pydial's long format.

* :func:`arena` -- real data: 26,919 Chatbot Arena battles among 20 models, labelled
  by Chatbot Arena voters (judge ``"human"``) and by three LLM judges
  (``gpt-4-0125-preview``, ``claude-3-opus-20240229``, ``gpt-3.5-turbo``).  Source:
  Networks-Learning/prediction-powered-ranking (commit af64521, folder data/), MIT
  License (``examples/LICENSE.arena``), converted by :func:`pydial.io.from_arena`.
  Record ids are the battles' ``question_id``.  The LLM judges saw model_a first
  ("Assistant A"): this display order is an assumption about the source, which does
  not store it.
* :func:`synthetic` -- one draw of the paper's main simulation design
  (``pydial.simulate(n_llm=4000, n_human=300, seed=2026)``).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from pydial.data.comparisons import Comparisons
from pydial.exceptions import ArgumentError

NAMES: tuple[str, ...] = ("arena", "synthetic")


def path(name: str) -> Path:
    """File of a bundled data set (``"arena"`` or ``"synthetic"``)."""
    if name not in NAMES:
        raise ArgumentError(f"unknown data set {name!r}; bundled: {NAMES}")
    fname = {"arena": "arena.csv.gz", "synthetic": "synthetic.csv.gz"}[name]
    return Path(str(files("pydial.examples") / fname))


def arena() -> Comparisons:
    """Load the Chatbot Arena battles (real data; see the module docstring)."""
    return Comparisons.from_csv(path("arena"), record_id="record_id")


def synthetic() -> Comparisons:
    """Load the bundled synthetic example (paper's main simulation design)."""
    return Comparisons.from_csv(path("synthetic"))
