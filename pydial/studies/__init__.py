"""Studies built on the fits: simulation of the paper's data-generating processes, metrics and human-label planning."""
