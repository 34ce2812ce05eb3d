"""Experiments on top of runs: grid search over RAG configurations, A/B comparison with paired
statistics, power analysis, and the regression gate with baseline files.

>>> from ragmeter.experiments import compare_runs, run_grid   # doctest: +SKIP
>>> from ragmeter.experiments.gate import gate                # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["compare_runs", "evaluate_pipeline", "load_baseline", "power_for_run", "run_grid",
           "save_baseline"]


def __getattr__(name: str) -> Any:
    # lazy: importing ragmeter.experiments does not import the grid machinery
    if name == "compare_runs":
        from ragmeter.experiments.compare import compare_runs

        return compare_runs
    if name in ("run_grid", "evaluate_pipeline"):
        from ragmeter.experiments import grid

        return getattr(grid, name)
    if name == "power_for_run":
        from ragmeter.experiments.power import power_for_run

        return power_for_run
    if name in ("save_baseline", "load_baseline"):
        from ragmeter.experiments import runs

        return getattr(runs, name)
    raise AttributeError(name)
