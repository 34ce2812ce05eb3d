"""Execution statistics of a stored run's agent traces (the figures are
:func:`ragmeter.metrics.agent.execution.execution_stats`)."""

from __future__ import annotations

from typing import Any

from ragmeter.metrics.agent.execution import STAT_FIGURES, describe, execution_stats, scores_traces

__all__ = ["STAT_FIGURES", "describe", "execution_stats", "run_execution_stats", "scores_traces"]


def run_execution_stats(store: Any, run_id: str) -> dict[str, Any]:
    """:func:`~ragmeter.metrics.agent.execution.execution_stats` of a stored run (its samples as
    evaluated; of a run scored per span, its traces, not their span and agent rows)."""
    from ragmeter.run.spans import rows_for

    return execution_stats(rows_for(("trace",), store.run_samples(store.resolve_run(run_id))))
