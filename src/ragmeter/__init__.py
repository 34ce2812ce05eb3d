"""ragmeter: measure how good a RAG system and the agent around it are.

Public surface: :func:`evaluate`, :func:`load`, :func:`save`, the schema classes and the errors.
Per-metric functions live in ``ragmeter.metrics`` (e.g. ``ragmeter.metrics.retrieval``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmeter import _compat
from ragmeter._version import __version__
from ragmeter.core.errors import (
    CheckFailedError,
    ConfigError,
    DatasetError,
    IncompleteRunError,
    JudgeError,
    MetricError,
    RagmeterError,
    StoreError,
)

_compat.install()  # the old import paths of moved modules keep working (docs/internals.md)

if TYPE_CHECKING:
    from ragmeter.core.schema import AgentTrace, Chunk, Sample, Score, ToolCall
    from ragmeter.io import Dataset, load, save
    from ragmeter.run.eval_config import EvalConfig
    from ragmeter.run.runner import EvaluationResult

#: names loaded on first use, so that ``import ragmeter`` (and every CLI command) does not pay
#: for the dataset readers and the schema (pydantic) until something needs them
_LAZY = {"Dataset": "ragmeter.io", "load": "ragmeter.io", "save": "ragmeter.io",
         "AgentTrace": "ragmeter.core.schema", "Chunk": "ragmeter.core.schema", "Sample": "ragmeter.core.schema",
         "Score": "ragmeter.core.schema", "ToolCall": "ragmeter.core.schema"}

#: ``ragmeter.NAME`` attributes that import their module on first use
_SUBPACKAGES = {"agreement": "ragmeter.stats.agreement", "human": "ragmeter.human"}

__all__ = [
    "AgentTrace", "Chunk", "ConfigError", "Dataset", "DatasetError", "EvalConfig", "EvaluationResult",
    "JudgeError", "MetricError", "RagmeterError", "Sample", "Score", "StoreError", "ToolCall",
    "__version__", "estimate_run_cost", "evaluate", "load", "save",
    "CheckFailedError", "IncompleteRunError",
]


def evaluate(data: Any, metrics: Sequence[str | dict[str, Any]] | None = None, *,
             config: EvalConfig | str | Path | dict[str, Any] | None = None, **options: Any) -> EvaluationResult:
    """Score every sample of ``data`` with every metric and store the run.

    >>> result = ragmeter.evaluate("example", ["token_f1", "mrr"], thresholds={"token_f1": 0.3})  # doctest: +SKIP
    >>> result.summary["token_f1"]["pass"]["rate"]                                                # doctest: +SKIP

    The options build one :class:`~ragmeter.run.eval_config.EvalConfig` (checked once, a bad value
    is a :class:`ConfigError` naming the field); ``config=`` also takes one, ready made:
    ``ragmeter.evaluate("example", config=EvalConfig(metrics=("token_f1",), db="sqlite:///:memory:"))``.

    Args:
        data: a dataset path (.jsonl/.csv/.parquet), ``"example"`` (the bundled dataset),
            ``"dataset:NAME"`` (a stored dataset), or a list of dicts / :class:`Sample`.
        metrics: metric names (``"token_f1"``, ``"ndcg@10"``) or ``{"name", "params"}`` mappings.
        config: an :class:`~ragmeter.run.eval_config.EvalConfig`, or a config file path or mapping
            (``metrics``, ``options``, ``thresholds`` ...).
        **options: the fields of :class:`~ragmeter.run.eval_config.EvalConfig`:
            ``max_missing`` (the share of samples, 0-1, a metric may lack a value on before the run
            is ``incomplete``), ``mapping`` (``{field: column}``), ``on_error`` (``"raise"`` or
            ``"skip"`` bad rows), ``db`` (a store or SQLAlchemy URL; default ``$RAGMETER_DB`` or
            ``.ragmeter/ragmeter.db``; ``"sqlite:///:memory:"`` keeps nothing), ``resume`` (a run
            id to finish), ``name``, ``options`` (run-wide metric options: ``judge``,
            ``embedding_model`` ...), ``progress``, ``skip_unavailable``, ``where`` (keep samples
            whose metadata match), ``engine`` (``"local"`` or ``"ray"``), ``ray_address``,
            ``thresholds`` (``{"token_f1": 0.5, "hallucination": "<=0.2"}``), ``pass_rule``
            (``"all"`` samples or a pass-rate target for the Wilson lower bound) and ``per_span``
            (score each agent trace per span: retriever, LLM and tool spans and each agent as rows
            linked to their trace, intervals clustered by trace).

    Returns:
        An :class:`~ragmeter.run.runner.EvaluationResult` (``summary``, ``rows()``, ``to_pandas()``;
        shown as an HTML table in Jupyter).

    Raises:
        DatasetError: a bad row (with ``on_error="raise"``).
        ConfigError: unknown options or metrics, bad values, unavailable metrics.
    """
    from ragmeter.run.runner import evaluate as _evaluate

    return _evaluate(data, metrics, config=config, **options)


def estimate_run_cost(data: Any, metrics: Sequence[str | dict[str, Any]] | None = None, *,
                      config: EvalConfig | str | Path | dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """See :func:`ragmeter.run.estimate.estimate_run_cost` (judge calls and cost of an evaluation, no
    calls made); takes what :func:`evaluate` takes."""
    from ragmeter.run.estimate import estimate_run_cost as _estimate

    return _estimate(data, metrics, config=config, **options)


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "EvaluationResult":
        from ragmeter.run.runner import EvaluationResult

        return EvaluationResult
    if name == "EvalConfig":
        from ragmeter.run.eval_config import EvalConfig

        return EvalConfig
    if name in _SUBPACKAGES:  # ``ragmeter.human.X`` after ``import ragmeter``
        import importlib

        if _compat.new_name(f"ragmeter.{name}") is not None:  # "agreement" is an old path (MOVED)
            import warnings

            warnings.warn(_compat.deprecation_message(f"ragmeter.{name}", _SUBPACKAGES[name]), FutureWarning,
                          stacklevel=2)
        return importlib.import_module(_SUBPACKAGES[name])
    raise AttributeError(name)
