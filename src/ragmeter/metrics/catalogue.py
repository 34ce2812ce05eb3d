"""The metrics of ragas 0.4.3 and DeepEval 4.3.1 by their class names, and ragmeter's metric for each.

A ragmeter metric computes a tool's metric when its spec declares it (``MetricSpec.equals``
``{tool, version, metric}``: given the same judge verdicts, the same number); ``ragmeter metrics
--from ragas|deepeval`` prints this table. The lists are the tools' text metrics as their packages
export them (``ragas.metrics.collections``, ``deepeval.metrics``); multi-modal ones are left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragmeter.metrics.registry import MetricSpec, all_metrics

#: the tools' releases the catalogue lists
VERSIONS = {"ragas": "0.4.3", "deepeval": "4.3.1"}

#: every text metric class of ``ragas.metrics.collections`` 0.4.3
RAGAS = (
    "AgentGoalAccuracyWithReference", "AgentGoalAccuracyWithoutReference", "AnswerAccuracy",
    "AnswerCorrectness", "AnswerRelevancy", "BleuScore", "CHRFScore", "ContextEntityRecall",
    "ContextPrecisionWithReference", "ContextPrecisionWithoutReference", "ContextUtilization",
    "ContextRecall", "ContextRelevance", "DataCompyScore", "DomainSpecificRubrics", "ExactMatch",
    "FactualCorrectness", "Faithfulness", "InstanceSpecificRubrics", "NoiseSensitivity",
    "NonLLMStringSimilarity", "QuotedSpansAlignment", "ResponseGroundedness", "RougeScore",
    "SQLSemanticEquivalence", "SemanticSimilarity", "StringPresence", "SummaryScore",
    "ToolCallAccuracy", "ToolCallF1", "TopicAdherence",
)

#: every text metric of ``deepeval.metrics`` 4.3.1 (the class names without their ``Metric`` suffix)
DEEPEVAL = (
    "AnswerRelevancy", "ArgumentCorrectness", "Bias", "ContextualPrecision", "ContextualRecall",
    "ContextualRelevancy", "ConversationCompleteness", "ConversationalDAG", "ConversationalGEval",
    "DAGMetric", "ExactMatch", "Faithfulness", "GEval", "GoalAccuracy", "Hallucination",
    "JsonCorrectness", "KnowledgeRetention", "MCPTaskCompletion", "MCPUse", "MultiTurnMCPUse",
    "Misuse", "NonAdvice", "PIILeakage", "PatternMatch", "PlanAdherence", "PlanQuality",
    "PromptAlignment", "RoleAdherence", "RoleViolation", "StepEfficiency", "Summarization",
    "TaskCompletion", "ToolCorrectness", "ToolPermission", "ToolUse", "TopicAdherence", "Toxicity",
    "TurnContextualPrecision", "TurnContextualRecall", "TurnContextualRelevancy", "TurnFaithfulness",
    "TurnRelevancy", "AgentLoopDetection", "AgentResponsiveness", "ArenaGEval",
)

TOOLS: dict[str, tuple[str, ...]] = {"ragas": RAGAS, "deepeval": DEEPEVAL}

_WORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(class_name: str) -> str:
    """A tool's class name as ragmeter spells the metric after the tool's prefix.

    >>> [snake_case(n) for n in ("CHRFScore", "NonLLMStringSimilarity", "ToolCallF1", "BiasMetric")]
    ['chrf_score', 'non_llm_string_similarity', 'tool_call_f1', 'bias']
    """
    name = class_name.rsplit(".", 1)[-1]
    if name.endswith("Metric") and name != "Metric":
        name = name[: -len("Metric")] or name
    return _WORD_BREAK.sub("_", name).lower()


def _class_key(name: str) -> str:
    """The comparable part of a tool's metric name: the last dotted part without ``Metric``
    (DeepEval's classes are ``BiasMetric``, ``DAGMetric``; ragas' are bare)."""
    last = name.rsplit(".", 1)[-1]
    return last[: -len("Metric")] if last.endswith("Metric") and last != "Metric" else last


@dataclass(frozen=True)
class Entry:
    """One metric of a tool and the ragmeter metric that computes it (``None``: missing)."""

    tool: str
    version: str
    metric: str
    ragmeter: str | None
    exact: bool

    def to_dict(self) -> dict[str, object]:
        return {"tool": self.tool, "version": self.version, "metric": self.metric,
                "ragmeter": self.ragmeter, "exact": self.exact,
                "status": "exact" if self.exact else "missing"}


def _matches(spec: MetricSpec, tool: str, class_name: str) -> bool:
    eq = spec.equals
    if not eq or eq.get("tool") != tool:
        return False
    key = _class_key(class_name)
    # a tool's class computing the same as the one a spec names (ragas' ContextUtilization is its
    # ContextPrecisionWithoutReference) is one of the spec's aliases
    return _class_key(eq.get("metric", "")) == key or any(_class_key(a) == key for a in spec.aliases)


def coverage(tool: str, specs: Sequence[MetricSpec] | None = None) -> list[Entry]:
    """Every metric of ``tool`` (``ragas`` or ``deepeval``) with ragmeter's metric that equals it.

    Raises:
        KeyError: an unknown tool.
    """
    names = TOOLS[tool]
    pool = list(all_metrics() if specs is None else specs)
    out = []
    for class_name in names:
        found = [s for s in pool if _matches(s, tool, class_name)]
        # the spec naming exactly this class first, then by name, so the choice is stable
        found.sort(key=lambda s: (_class_key((s.equals or {}).get("metric", "")) != _class_key(class_name), s.name))
        spec = found[0] if found else None
        exact = spec is not None and (spec.equals or {}).get("version") == VERSIONS[tool]
        out.append(Entry(tool, VERSIONS[tool], class_name, spec.name if spec else None, exact))
    return out
