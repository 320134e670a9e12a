"""The program configurations checked by SBC and their small designs.

Every shipped sampling program and tie family: ``judges.stan`` (binary, Davidson,
Rao-Kupper) and ``dial_sample.stan`` at rank 1 with the calibration basis ``M = mu``
and ``M = W`` (binary, Davidson).  The priors are the defaults that
:func:`pydial.stan.posterior` passes (:data:`pydial.stan.schema.JUDGES_PRIORS`,
:data:`pydial.stan.schema.DIAL_SAMPLE_PRIORS`), given to the programs explicitly.
The designs are complete: every judge compares every pair in both display orders
``n_llm`` times, the people compare every pair ``n_human`` times.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydial.stan.schema import DIAL_SAMPLE_PRIORS, JUDGES_PRIORS

__all__ = ["Config", "CONFIGS", "QUICK", "config"]


@dataclass(frozen=True)
class Config:
    """One SBC configuration: a program, its tie family and calibration, a design and priors.

    Attributes
    ----------
    name : str
        Label used in file names and tables.
    program : {"judges", "dial_sample"}
        The shipped program (or a path to a copy of it, see :func:`dataclasses.replace`).
    ties : {None, "davidson", "rao-kupper"}
    calibration : {None, "mu", "W"}
        ``dial_sample`` only: the human calibration basis ``M``.
    N, K : int
        Items and LLM judges.
    n_llm : int
        Judgments per (judge, pair, display order).
    n_human : int
        Human judgments per pair.
    priors : dict
        The prior settings passed to the program (names of the program's prior table).
    """

    name: str
    program: str
    ties: str | None
    calibration: str | None
    N: int
    K: int
    n_llm: int
    n_human: int
    priors: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """Which program's parameterization: ``"judges"`` or ``"dial_sample"`` (also for a copy given by path)."""
        return "judges" if "judges" in self.program else "dial_sample"


def _judges(ties: str | None, name: str) -> Config:
    return Config(name, "judges", ties, None, N=4, K=2, n_llm=3, n_human=6, priors=dict(JUDGES_PRIORS))


def _dial(ties: str | None, calibration: str, name: str) -> Config:
    return Config(name, "dial_sample", ties, calibration, N=5, K=3, n_llm=2, n_human=4, priors=dict(DIAL_SAMPLE_PRIORS))


CONFIGS: tuple[Config, ...] = (
    _judges(None, "judges-binary"),
    _judges("davidson", "judges-davidson"),
    _judges("rao-kupper", "judges-raokupper"),
    _dial(None, "mu", "dial-mu-binary"),
    _dial("davidson", "mu", "dial-mu-davidson"),
    _dial(None, "W", "dial-W-binary"),
    _dial("davidson", "W", "dial-W-davidson"),
)
"""The configurations of ``python -m analyses.sbc run``."""

QUICK = Config("judges-binary-tiny", "judges", None, None, N=3, K=1, n_llm=1, n_human=3, priors=dict(JUDGES_PRIORS))
"""The reduced SBC of the test suite: ``judges.stan``, binary, 3 items, one judge."""


def config(name: str) -> Config:
    """Return the configuration called ``name`` (one of :data:`CONFIGS` or :data:`QUICK`)."""
    for c in (*CONFIGS, QUICK):
        if c.name == name:
            return c
    raise ValueError(f"unknown SBC configuration {name!r}; known: {[c.name for c in (*CONFIGS, QUICK)]}")
