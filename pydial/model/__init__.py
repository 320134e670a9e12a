"""The model layer: the chart, the outcome families, the likelihoods with exact derivatives, meats and identifiability.

Built on :mod:`pydial.data`; imports nothing from inference, estimation or Stan.
"""
