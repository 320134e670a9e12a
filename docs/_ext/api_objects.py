"""Objects documented in the API reference besides ``pydial.__all__`` and ``pydial.stan.__all__``.

The result classes are returned by the public functions but not exported at the top
level; the judge-panel and robustness-study names are used through their modules
(``from pydial.studies import robustness``).  The API reference documents them under
their module path, and the internal module pages leave them out.
"""

RESULT_CLASSES = (
    "pydial.inference.calibration_test.CalibrationTest",
    "pydial.estimation.bootstrap.BootstrapResult",
    "pydial.studies.simulate.Truth",
)

STUDY_OBJECTS = (
    "pydial.data.panel.panel_counts",
    "pydial.studies.diagnostics.plot_judge_diagnostics",
    "pydial.studies.diagnostics.plot_position_vs_swap",
    *(f"pydial.studies.robustness.{name}" for name in (
        "run", "summarize", "plot", "load", "study", "Study", "sweep_by_name", "Sweep", "display_imbalance",
        "pure_position", "anti_consensus", "llm_budget", "human_budget", "calibration")),
)
