"""The data layer: the long table of comparisons (:class:`~pydial.data.comparisons.Comparisons`), readers, bundled data.

Imports nothing from the layers above it (model, inference, estimation, stan).
"""
