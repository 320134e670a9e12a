"""``python -m analyses.realdata``: the real-data protocol's command line (:mod:`analyses.realdata.cli`)."""

from .cli import main

raise SystemExit(main())
