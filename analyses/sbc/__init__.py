"""Simulation-based calibration (SBC) of pydial's Stan sampling programs.

Talts, Betancourt, Simpson, Vehtari & Gelman (2018), "Validating Bayesian inference
algorithms with simulation-based calibration", arXiv:1804.06788; Modrák, Moon, Kim,
Bürkner, Huurre, Faltejsková, Gelman & Vehtari (2023), "Simulation-based calibration
checking for Bayesian computation: the choice of test quantities shapes sensitivity",
Bayesian Analysis.  If every simulation draws the parameters from the prior the
program states and the data from the model, the rank of each true identified scalar
among (nearly independent) posterior draws is uniform on ``0..L``.

Modules (one concern each):

* :mod:`.configs` -- the program configurations and their small designs;
* :mod:`.priors` -- the prior sampler, written in numpy from the program headers;
* :mod:`.simulate` -- judgments simulated from the drawn parameters;
* :mod:`.fit` -- Stan data through :mod:`pydial.stan.schema`, NUTS, identified draws;
* :mod:`.ranks` -- one simulation and the whole (parallel, seeded) run;
* :mod:`.uniformity` -- ECDF bands (Säilynoja, Bürkner & Vehtari 2022) and tests;
* :mod:`.report` -- plots and summary tables;
* :mod:`.prior_predictive` -- what the default priors imply for win probabilities.

Run from the repository root: ``python -m analyses.sbc run`` (see ``README.md``).
"""
