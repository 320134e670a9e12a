"""Coverage studies of pydial's intervals (sandwich, bootstrap, posteriors)."""
