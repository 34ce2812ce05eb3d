"""Grid search over RAG configurations: run the user's pipeline for every combination of
parameters, score each with the chosen correctness method and metrics, rank with confidence
intervals, say when the winner is within noise, re-rank the top N with an LLM judge after a cost
estimate, and store everything (one run per configuration, the ranking in the ``grid`` kv
namespace). Optional successive halving spends the budget on the promising configurations.

Modules: :mod:`.plan` (config and questions), :mod:`.execute` (pipeline runs and their cache),
:mod:`.ranking` (ranking and judge cost), :mod:`.search` (the loop, halving, ``evaluate_pipeline``).
"""

from ragmeter.analysis.grid.execute import (
    PipelineStats,
    build_samples,
    cache_key,
    pipeline_version,
    run_pipeline,
)
from ragmeter.analysis.grid.plan import (
    BUNDLED_PIPELINE_VERSION,
    CORRECTNESS_KEY,
    JUDGE_KEY,
    KV_GRID,
    KV_PIPELINE,
    GridConfig,
    HalvingConfig,
    Question,
    parse_grid_config,
    questions_of,
)
from ragmeter.analysis.grid.ranking import ConfigResult, estimate_judge_cost, rank
from ragmeter.analysis.grid.search import GridResult, evaluate_pipeline, run_grid
from ragmeter.metrics.correctness.methods import METHODS

__all__ = [
    "BUNDLED_PIPELINE_VERSION", "CORRECTNESS_KEY", "JUDGE_KEY", "KV_GRID", "KV_PIPELINE", "METHODS", "ConfigResult",
    "GridConfig", "GridResult", "HalvingConfig", "PipelineStats", "Question", "build_samples", "cache_key",
    "estimate_judge_cost", "evaluate_pipeline", "parse_grid_config", "pipeline_version", "questions_of",
    "rank", "run_grid", "run_pipeline",
]
