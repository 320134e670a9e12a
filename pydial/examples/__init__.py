"""Data files of :mod:`pydial.datasets` (``arena.csv.gz`` with ``LICENSE.arena``, ``synthetic.csv.gz``)."""
