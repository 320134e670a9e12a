"""Data files of :mod:`pydial.datasets` (``arena.csv.gz`` with ``LICENSE.arena``, ``synthetic.csv.gz``)."""

from __future__ import annotations

from pathlib import Path

from pydial.data.comparisons import Comparisons


def example_path() -> Path:
    """Path of the bundled synthetic long-format CSV."""
    from pydial.data.datasets import path

    return path("synthetic")


def load_example() -> Comparisons:
    """Load the bundled synthetic example (see :func:`pydial.datasets.synthetic`)."""
    from pydial.data.datasets import synthetic

    return synthetic()
