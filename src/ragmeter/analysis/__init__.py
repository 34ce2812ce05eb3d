"""The aggregate stage: analysis across runs. A/B comparison with paired statistics (``compare``),
the regression gate with baseline files (``gate``, ``runs``), power analysis (``power``), grid
search over RAG configurations (``grid``), consistency over repeated runs and across models
(``consistency``), metrics against human labels (``meta_eval``, ``correctness``).

>>> from ragmeter.analysis import compare_runs, run_grid   # doctest: +SKIP
>>> from ragmeter.analysis.gate import gate                # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["compare_runs", "evaluate_pipeline", "load_baseline", "power_for_run", "run_grid",
           "save_baseline"]


def __getattr__(name: str) -> Any:
    # lazy: importing ragmeter.analysis does not import the grid machinery
    if name == "compare_runs":
        from ragmeter.analysis.compare import compare_runs

        return compare_runs
    if name in ("run_grid", "evaluate_pipeline"):
        from ragmeter.analysis import grid

        return getattr(grid, name)
    if name == "power_for_run":
        from ragmeter.analysis.power import power_for_run

        return power_for_run
    if name in ("save_baseline", "load_baseline"):
        from ragmeter.analysis import runs

        return getattr(runs, name)
    raise AttributeError(name)
