"""Answer correctness, keyword matching, semantic similarity and an LLM judge behind one parameter: ``keyword``,
``semantic_fixed``, ``semantic_dynamic`` (threshold calibrated on human labels),
``semantic_guarded`` (ragmeter's offline fix of the plain threshold), ``llm_judge`` and ``hybrid``.

Plain functions work on texts (:func:`keyword_correct`, :func:`semantic_fixed`,
:func:`semantic_guarded`, :func:`calibrate_threshold`); in a run each method is the metric
``correct_<method>`` (``ragmeter eval data.jsonl --method semantic_guarded``), registered by
:mod:`ragmeter.metrics.correctness.correct`.
"""

from __future__ import annotations

from ragmeter.metrics.correctness.calibration import (
                                              BinaryScores,
                                              Calibration,
                                              binary_scores,
                                              calibrate_threshold,
                                              candidate_thresholds,
                                              threshold_curve,
                                              validation_split,
)
from ragmeter.metrics.correctness.methods import (
                                              DEFAULT_THRESHOLD,
                                              METHODS,
                                              GuardParams,
                                              guarded_decision,
                                              keyword_correct,
                                              metric_for_method,
                                              reference_similarities,
                                              semantic_fixed,
                                              semantic_guarded,
)

__all__ = [
    "DEFAULT_THRESHOLD", "METHODS", "BinaryScores", "Calibration", "GuardParams", "binary_scores",
    "calibrate_threshold", "candidate_thresholds", "guarded_decision", "keyword_correct",
    "metric_for_method", "reference_similarities", "semantic_fixed", "semantic_guarded",
    "threshold_curve", "validation_split",
]
