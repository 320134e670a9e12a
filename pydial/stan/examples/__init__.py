"""Worked extensions of pydial's Stan programs, installed with the package.

Each extension is a Stan program (``<name>.stan``, found by
:func:`pydial.stan.example_program`) and a module of the same name that fits it
(``python -m pydial.stan.examples.<name>``, or its ``run`` function):

* :mod:`pydial.stan.examples.tie_gap` -- ``judges.stan`` plus a tie rate that
  decays with the squared score gap, compared with the shipped Davidson model by
  PSIS-LOO on the bundled Chatbot Arena data.
"""
