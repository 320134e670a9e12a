"""The inference layer: the linearization of a fit (sandwich covariances, Wald tables) and the calibration LRT."""
