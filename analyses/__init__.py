"""Analyses that regenerate the paper's figures and tables (not part of the installed package)."""
