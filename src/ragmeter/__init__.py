"""ragmeter: measure how good a RAG system and the agent around it are.

Public surface: :func:`evaluate`, :func:`load`, :func:`save`, the schema classes and the errors.
Per-metric functions live in ``ragmeter.metrics`` (e.g. ``ragmeter.metrics.retrieval``).
"""

from __future__ import annotations

from ragmeter._version import __version__
from ragmeter.errors import (
    CheckFailedError,
    ConfigError,
    DatasetError,
    IncompleteRunError,
    JudgeError,
    MetricError,
    RagmeterError,
    StoreError,
)
from ragmeter.io import Dataset, load, save
from ragmeter.schema import AgentTrace, Chunk, Sample, Score, ToolCall

__all__ = [
    "AgentTrace", "Chunk", "ConfigError", "Dataset", "DatasetError", "EvaluationResult",
    "JudgeError", "MetricError", "RagmeterError", "Sample", "Score", "StoreError", "ToolCall",
    "__version__", "estimate_run_cost", "evaluate", "load", "save",
    "CheckFailedError", "IncompleteRunError",
]


def evaluate(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`ragmeter.runner.evaluate`."""
    from ragmeter.runner import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


def estimate_run_cost(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`ragmeter.estimate.estimate_run_cost` (judge calls and cost of an evaluation, no calls made)."""
    from ragmeter.estimate import estimate_run_cost as _estimate

    return _estimate(*args, **kwargs)


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    if name == "EvaluationResult":
        from ragmeter.runner import EvaluationResult

        return EvaluationResult
    if name in ("agreement", "human"):  # ``ragmeter.agreement.cohen_kappa`` after ``import ragmeter``
        import importlib

        return importlib.import_module(f"ragmeter.{name}")
    raise AttributeError(name)
