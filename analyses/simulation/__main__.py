"""``python -m analyses.simulation``: the synthetic study's command line (:mod:`analyses.simulation.cli`)."""

from .cli import main

raise SystemExit(main())
