"""DeepEval 4.3.1's judged agent metrics with DeepEval's numbers, one value per agent trace (scope
``trace``): ``deepeval:task_completion``, ``deepeval:step_efficiency``, ``deepeval:plan_adherence``,
``deepeval:plan_quality``, ``deepeval:argument_correctness``.

DeepEval reads the first four from the ``@observe`` trace of a test case (``_trace_dict``, a tree of
spans): here that tree is made from the sample's trace (``deepeval_trace_tree`` in
:mod:`ragmeter.metrics.agent.deepeval_agent`: its spans, or its tool calls under one agent span) and
given to the judge as JSON. Task completion without spans reads the question, answer and tool calls
as DeepEval does for a test case without a trace. Argument correctness reads the question and the
trace's tool calls (DeepEval's ``input`` and ``tools_called``).

The judge gets DeepEval's questions in one structured request per sample where DeepEval asks two or
three (extract the task, extract the plan, score), and the number is DeepEval's: its score or verdict,
an empty plan scored 1, no tool call scored 1, ``strict_mode`` (0 below 1), ``threshold`` deciding
``success``. tests/test_parity_deepeval_agentic_judged.py runs DeepEval itself against a scripted judge.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.agent.deepeval_agent import deepeval_trace_tree
from ragmeter.metrics.judge._common import JudgedMetric, Verdict, judge_check, tool_equals
from ragmeter.metrics.judge.deepeval_metrics import deepeval_params, qag_score
from ragmeter.metrics.registry import MetricSpec, register_metric

DEFAULTS: dict[str, Any] = {"threshold": 0.5, "strict_mode": False}
REFUSED = "empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)"


class TaskCompletion(Verdict):
    task: str
    outcome: str
    reason: str
    verdict: float = Field(ge=0, le=1)


class StepEfficiency(Verdict):
    task: str
    reason: str
    score: float = Field(ge=0, le=1)


class PlanScore(Verdict):
    task: str
    plan: list[str]
    reason: str
    score: float = Field(ge=0, le=1)


class CallVerdict(Verdict):
    call: int
    reason: str
    verdict: Literal["yes", "no"]


class CallVerdicts(Verdict):
    verdicts: list[CallVerdict]


def _trace_json(s: Sample) -> str:
    assert s.trace is not None
    return json.dumps(deepeval_trace_tree(s.trace), indent=2, ensure_ascii=False, default=str)


def _value(value: float, p: dict[str, Any], details: dict[str, Any]) -> Score:
    """DeepEval's ending of a scored metric: 0 in strict mode below the threshold (1)."""
    strict = bool(p.get("strict_mode", False))
    threshold = 1.0 if strict else float(p.get("threshold", 0.5))
    if strict and value < threshold:
        value = 0.0
    details.update(threshold=threshold, strict_mode=strict, success=value >= threshold)
    return Score(value, details=details)


def _register(jm: JudgedMetric, tool_class: str, *, requires: tuple[str, ...], description: str, parity: str,
              defaults: dict[str, Any] | None = None) -> None:
    register_metric(MetricSpec(
        name=jm.name, family="judge", fn=jm, requires=requires, needs_llm=True,
        defaults={**DEFAULTS, **(defaults or {})}, prepare=jm.prepare, check=judge_check, batch_size=64,
        description=description, parity=parity, equals=tool_equals("deepeval", tool_class),
        aliases=(tool_class, f"deepeval.metrics.{tool_class}"), scope="trace"))


def _tools_text(s: Sample) -> str:
    calls = s.trace.tool_calls if s.trace is not None else []
    return json.dumps([{"name": c.name, "input_parameters": c.arguments, "output": c.result} for c in calls],
                      indent=2, ensure_ascii=False, default=str)


# ---- task completion --------------------------------------------------------------------------------
def _task_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if s.answer == "":
        return Score.missing(REFUSED)
    task = [("TASK", p["task"])] if p.get("task") else []
    if s.trace is not None and s.trace.spans:
        return [*task, ("TRACE", _trace_json(s))]
    return [*task, ("INPUT", s.question or ""), ("ACTUAL OUTPUT", s.answer or ""), ("TOOLS CALLED", _tools_text(s))]


def _check_task(p: dict[str, Any]) -> None:
    deepeval_params("deepeval:task_completion")(p)
    if p.get("task") is not None and not isinstance(p["task"], str):
        from ragmeter.core.errors import MetricError

        raise MetricError(f"deepeval:task_completion: task must be a text, got {p['task']!r}")


_register(JudgedMetric("deepeval:task_completion", "deepeval_task_completion", TaskCompletion, _task_blocks,
                       lambda s, v, p, ctx: _value(v.verdict, p, v.model_dump()),
                       output_tokens=lambda s: 250, check_params=_check_task),
          "TaskCompletionMetric", requires=("question", "answer"), defaults={"task": None},
          description="""DeepEval's task completion (TaskCompletionMetric): the judge states the user's task (or
          takes the given task), describes factually what the agent did (from its trace, or from the
          question, answer and tool calls), and scores from 0 to 1 how well that outcome achieves the
          task. Score = that verdict; strict_mode: 0 below 1. Needs a judge.""",
          parity="DeepEval 4.3.1 TaskCompletionMetric given the same verdict: DeepEval extracts the task and "
                 "the outcome, then scores (two calls); ragmeter asks once. The trace is DeepEval's span tree "
                 "made from the sample's trace when it has spans; without spans, the input, actual output and "
                 "tools called, as DeepEval reads a test case without a trace.")


# ---- step efficiency --------------------------------------------------------------------------------
def _trace_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if s.answer == "":
        return Score.missing(REFUSED)
    return [("TRACE", _trace_json(s))]


_register(JudgedMetric("deepeval:step_efficiency", "deepeval_step_efficiency", StepEfficiency, _trace_blocks,
                       lambda s, v, p, ctx: _value(v.score, p, v.model_dump()),
                       output_tokens=lambda s: 150, check_params=deepeval_params("deepeval:step_efficiency")),
          "StepEfficiencyMetric", requires=("question", "answer", "trace"),
          description="""DeepEval's step efficiency (StepEfficiencyMetric): the judge reads the agent's trace, states
          its task and scores from 0 to 1 how close the execution came to the minimal sequence of actions
          (DeepEval's strict scale: 1, 0.75, 0.5, 0.25, 0). Score = that score; strict_mode: 0 below 1.
          Needs a trace and a judge.""",
          parity="DeepEval 4.3.1 StepEfficiencyMetric given the same score: DeepEval extracts the task from the "
                 "trace, then scores (two calls); ragmeter asks once, on DeepEval's span tree made from the trace.")


# ---- plan adherence and plan quality ------------------------------------------------------------------
def _plan_score(s: Sample, v: PlanScore, p: dict[str, Any], _ctx: Any) -> Score:
    details = v.model_dump()
    if not v.plan:  # DeepEval: no plan in the trace scores 1
        details["summary"] = "no plan in the trace: DeepEval scores 1"
        return _value(1.0, p, details)
    return _value(v.score, p, details)


for _name, _cls, _what in (("deepeval:plan_adherence", "PlanAdherenceMetric",
                            "how strictly the trace's actions follow that plan (plan obedience only)"),
                           ("deepeval:plan_quality", "PlanQualityMetric",
                            "the plan's quality for the task (complete, ordered, minimal, specific)")):
    _register(JudgedMetric(_name, _name.replace(":", "_"), PlanScore, _trace_blocks, _plan_score,
                           output_tokens=lambda s: 250, check_params=deepeval_params(_name)),
              _cls, requires=("question", "answer", "trace"),
              description=f"""DeepEval's {_name.split(':')[1].replace('_', ' ')} ({_cls}): the judge reads the agent's
              trace, states its task, extracts the plan the agent stated (only steps the trace shows) and
              scores from 0 to 1 {_what}, on DeepEval's strict scale. Score = that score, 1 when the trace
              holds no plan; strict_mode: 0 below 1. Needs a trace and a judge.""",
              parity=f"DeepEval 4.3.1 {_cls} given the same plan and score: DeepEval extracts the task and the "
                     "plan, then scores (three calls; an empty plan scores 1 without the third); ragmeter asks "
                     "once, on DeepEval's span tree made from the trace.")


# ---- argument correctness ------------------------------------------------------------------------------
def _argument_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    calls = s.trace.tool_calls if s.trace is not None else []
    if not calls:  # DeepEval: no tool call scores 1, without a call to the judge
        return qag_score(0, 0, p, {"verdicts": []}, noun="tool calls", what="with correct arguments",
                         empty_score=1.0, empty="no tool call")
    blocks = [("INPUT", s.question or "")]
    for i, c in enumerate(calls, 1):
        extra = c.model_extra or {}
        call = {"name": c.name, **{k: extra[k] for k in ("description", "reasoning") if extra.get(k)},
                "input_parameters": c.arguments or None}
        blocks.append((f"TOOL CALL {i}", json.dumps(call, indent=2, ensure_ascii=False, default=str)))
    return blocks


def _one_per_call(s: Sample, p: dict[str, Any]) -> Any:
    n = len(s.trace.tool_calls) if s.trace is not None else 0

    def check(v: CallVerdicts) -> None:
        got = sorted(x.call for x in v.verdicts)
        if got != list(range(1, n + 1)):
            raise ValueError(f"expected one verdict for each tool call 1..{n}, got calls {got}")

    return check


def _argument_score(s: Sample, v: CallVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    ordered = sorted(v.verdicts, key=lambda x: x.call)
    k = sum(1 for x in ordered if x.verdict == "yes")
    return qag_score(k, len(ordered), p, {"verdicts": [x.model_dump() for x in ordered]}, noun="tool calls",
                     what="with correct arguments", empty_score=1.0, empty="no tool call")


_register(JudgedMetric("deepeval:argument_correctness", "deepeval_argument_correctness", CallVerdicts,
                       _argument_blocks, _argument_score, validate=_one_per_call,
                       output_tokens=lambda s: 30 + 40 * len(s.trace.tool_calls if s.trace else []),
                       check_params=deepeval_params("deepeval:argument_correctness")),
          "ArgumentCorrectnessMetric", requires=("question", "trace"),
          description="""DeepEval's argument correctness (ArgumentCorrectnessMetric): for each tool call of the
          trace, the judge says whether its input parameters correctly address the question (a call
          without parameters does not). Score = correct calls / calls; 1 without a tool call; strict_mode:
          0 below 1. Needs a judge.""",
          parity="DeepEval 4.3.1 ArgumentCorrectnessMetric given the same verdicts: score_qag_verdicts, 1 "
                 "without a tool call, strict_mode and threshold; the same one request per test case.")

__all__ = ["CallVerdicts", "PlanScore", "StepEfficiency", "TaskCompletion"]
