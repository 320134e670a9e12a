"""Worked extension: a tie rate that depends on the score gap, fitted on the Arena data.

``tie_gap.stan`` (:func:`pydial.stan.example_program`) is ``judges.stan`` plus lines marked ``// + tie gap``: a
cell of group ``g`` (an LLM judge, or the people) has the log tie parameter ``log nu_g - kappa_g * eta^2``.
:func:`run` samples it and the shipped Davidson model on the same data (plus the prior scale of ``kappa``) and
compares them by PSIS-LOO (:func:`pydial.stan.idata.compare`); ``kappa`` comes back over ``judge_human``.

Usage (from any directory; ``--records`` keeps the first Arena battles, a faster run)::

    python -m pydial.stan.examples.tie_gap [--records 5000] [--chains 4] [--draws 1000] [--backend cmdstanpy]
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from ...data.comparisons import Comparisons
from ..bayes import posterior
from ..idata import compare
from ..programs import example_program
from ..results import SamplerWarning

__all__ = ["arena_subset", "run", "main"]


def arena_subset(records: int | None) -> Comparisons:
    """Return the bundled Arena comparisons of the first ``records`` battles (``None``: all)."""
    from ...data.datasets import arena

    data = arena()
    return data if records is None else data.subset(records=list(data.record_ids)[:records])


def run(records: int | None = None, chains: int = 4, draws: int = 1000, warmup: int = 1000, seed: int = 1,
        backend: str | None = None, kappa_sd: float = 1.0) -> dict[str, Any]:
    """Sample the shipped Davidson model and the extension on the first ``records`` Arena battles; compare by PSIS-LOO.

    ``kappa_sd`` is the prior sd of each ``kappa_g`` (the extra datum ``prior_kappa_sd``).  Returns
    ``{"data", "shipped", "extended", "compare"}``: the comparisons, the two posteriors and
    the ``arviz.compare`` table.
    """
    data = arena_subset(records)
    kw: dict[str, Any] = dict(ties="davidson", chains=chains, draws=draws, warmup=warmup, seed=seed, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)
        shipped = posterior(data, "judges", **kw)
        extended = posterior(data, "judges", options={"program": str(example_program("tie_gap")),
                                                      "extra": {"prior_kappa_sd": kappa_sd}}, **kw)
    table = compare({"davidson": shipped, "davidson + tie gap": extended})
    return {"data": data, "shipped": shipped, "extended": extended, "compare": table}


def main(argv: list[str] | None = None) -> None:
    """Command line (``argv``, default ``sys.argv[1:]``): run :func:`run`, print ``kappa``, ``nu`` and the LOO table."""
    ap = argparse.ArgumentParser(prog="python -m pydial.stan.examples.tie_gap",
                                 description="A tie rate that depends on the score gap, fitted on the Arena data.")
    for option, default in (("--records", None), ("--chains", 4), ("--draws", 1000), ("--seed", 1)):
        ap.add_argument(option, type=int, default=default)
    ap.add_argument("--backend", default=None, choices=["cmdstanpy", "httpstan"])
    args = ap.parse_args(argv)
    out = run(args.records, args.chains, args.draws, args.draws, args.seed, args.backend)
    import arviz as az

    print(az.summary(out["extended"], var_names=["kappa", "nu"], kind="stats"))
    print(out["compare"])


if __name__ == "__main__":
    main()
