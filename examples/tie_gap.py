"""Worked extension: a tie rate that depends on the score gap, fitted on the Arena data.

``examples/tie_gap.stan`` is pydial's ``judges.stan`` (its ``#include`` lines) plus
the lines marked EXTENSION: a cell's log tie parameter is ``log nu_k - kappa *
eta^2`` instead of ``log nu_k``.  This script samples the shipped Davidson model
and the extension on the bundled Chatbot Arena data with the same data
dictionary (plus the extension's one extra datum, the prior scale of
``kappa``), and compares them by PSIS-LOO (``arviz.compare`` through
:func:`pydial.stan.idata.compare`, the same on arviz 0.x and 1.x).

Usage::

    python examples/tie_gap.py [--records 5000] [--chains 4] [--draws 1000] [--backend cmdstanpy]

``--records`` keeps the first ``records`` Arena battles (a smaller, faster run).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

PROGRAM = Path(__file__).with_name("tie_gap.stan")


def arena_subset(records: int | None) -> Any:
    """The bundled Arena comparisons, restricted to the first ``records`` battles."""
    import pydial

    data = pydial.datasets.arena()
    if records is None:
        return data
    return data.subset(records=list(data.record_ids)[:records])


def run(records: int | None = None, chains: int = 4, draws: int = 1000, warmup: int = 1000, seed: int = 1,
        backend: str | None = None, kappa_sd: float = 1.0) -> dict[str, Any]:
    """Sample both models and compare them; returns the two InferenceData and the comparison table."""
    import warnings

    import pydial
    from pydial.stan.idata import compare

    data = arena_subset(records)
    kw = dict(method="judges", ties="davidson", chains=chains, draws=draws, warmup=warmup, seed=seed, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pydial.stan.SamplerWarning)
        shipped = pydial.posterior(data, **kw)
        extended = pydial.posterior(data, program=str(PROGRAM), extra={"prior_kappa_sd": kappa_sd}, **kw)
    table = compare({"davidson": shipped, "davidson + tie gap": extended})
    return {"data": data, "shipped": shipped, "extended": extended, "compare": table}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default=None, choices=[None, "cmdstanpy", "httpstan"])
    args = ap.parse_args()
    out = run(args.records, args.chains, args.draws, args.draws, args.seed, args.backend)
    import arviz as az

    print(az.summary(out["extended"], var_names=["kappa", "nu"], kind="stats"))
    print(out["compare"])


if __name__ == "__main__":
    main()
