"""The paper's synthetic study: ``python -m analyses.simulation --help``."""
