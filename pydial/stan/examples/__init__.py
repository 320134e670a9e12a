"""Worked extensions of pydial's Stan programs: ``<name>.stan`` (:func:`pydial.stan.example_program`) and a module that fits it.

:mod:`pydial.stan.examples.tie_gap` (``python -m pydial.stan.examples.tie_gap``): ``judges.stan`` plus a tie
rate that decays with the squared score gap, compared with the shipped Davidson model by PSIS-LOO on the Arena data.
"""
