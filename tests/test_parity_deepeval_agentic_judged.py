"""DeepEval 4.3.1's judged agent metrics against DeepEval itself, given the same verdicts:
``deepeval:task_completion``, ``deepeval:step_efficiency``, ``deepeval:plan_adherence``,
``deepeval:plan_quality``, ``deepeval:argument_correctness``.

One scripted OpenAI-compatible server answers ragmeter's one request per trace and DeepEval's own
steps (task, outcome and plan extraction, then the score) from one script per sample. DeepEval reads
the trace as the span tree ragmeter makes of it (``deepeval_trace_tree``), set as the test case's
``_trace_dict`` (what ``@observe`` sets). Equal within 1e-6 with DeepEval's ``success``, for several
scores, ``strict_mode`` and ``threshold``, an empty plan, no tool call and an empty answer (refused).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ["PARITY_KEY"] = "parity"

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from parity_deepeval_conv_support import deepeval_model  # noqa: E402
from parity_server import Case, ParityServer  # noqa: E402
from ragmeter.core.context import ScoringContext  # noqa: E402
from ragmeter.core.schema import AgentTrace, Sample, ToolCall, TraceSpan  # noqa: E402
from ragmeter.metrics.agent.deepeval_agent import deepeval_trace_tree  # noqa: E402
from ragmeter.metrics.registry import resolve  # noqa: E402

PARAMS = [{}, {"strict_mode": True}, {"threshold": 0.8}]


class AgentServer(ParityServer):
    """Kinds: ``task`` (the completion verdict), ``efficiency`` (the score), ``plan`` (``(steps,
    score)``: the number of plan steps found and the score), ``arguments`` (yes/no per tool call)."""

    def _ragmeter(self, case: Case, schema: str, system: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "task" and schema == "TaskCompletion":
            return {"task": "t", "outcome": "o", "reason": "scripted", "verdict": v}
        if case.kind == "efficiency" and schema == "StepEfficiency":
            return {"task": "t", "reason": "scripted", "score": v}
        if case.kind == "plan" and schema == "PlanScore":
            return {"task": "t", "plan": [f"step {i}" for i in range(v[0])], "reason": "scripted", "score": v[1]}
        if case.kind == "arguments" and schema == "CallVerdicts":
            return {"verdicts": [{"call": i, "reason": "scripted", "verdict": x} for i, x in enumerate(v, 1)]}
        return super()._ragmeter(case, schema, system, user, mark)

    def _deepeval(self, case: Case, schema: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if schema == "TaskAndOutcome":
            return {"task": f"task {mark}", "outcome": f"outcome {mark}"}
        if schema == "Task":
            return {"task": f"task {mark}"}
        if case.kind == "task" and schema == "TaskCompletionVerdict":
            return {"verdict": v, "reason": "scripted"}
        if case.kind == "efficiency" and schema == "EfficiencyVerdict":
            return {"score": v, "reason": "scripted"}
        if case.kind == "plan":
            if schema == "AgentPlan":
                return {"plan": [f"step {i} {mark}" for i in range(v[0])]}
            if schema in ("PlanAdherenceScore", "PlanQualityScore"):
                return {"score": v[1], "reason": "scripted"}
        if case.kind == "arguments" and schema == "Verdicts":
            return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in v]}
        return super()._deepeval(case, schema, user, mark)


@pytest.fixture(scope="module")
def srv():
    s = AgentServer().start()
    yield s
    s.stop()


def traced(mark: str, i: int, *, spans: bool = True, calls: int = 2, answer: str = "The answer.") -> Sample:
    """A sample whose trace is a span tree (an agent span, an LLM span stating a plan, tool spans) or
    tool calls only."""
    tool_calls = [ToolCall(name=f"tool{k}", arguments={"q": f"arg {k} {mark}"}, result=f"result {k}") for k in range(calls)]
    trace = AgentTrace(tool_calls=tool_calls, input_text=f"Do the task {mark}", final_text=f"{answer} {mark}")
    if spans:
        trace.spans = [TraceSpan(span_id="a", kind="agent", name="agent", input=f"Do the task {mark}",
                                 output=f"{answer} {mark}"),
                       TraceSpan(span_id="l", parent_id="a", kind="llm", name="plan", input="plan it",
                                 output=f"My plan: call the tools {mark}"),
                       *[TraceSpan(span_id=f"t{k}", parent_id="a", kind="tool", name=c.name, tool_name=c.name,
                                   tool_arguments=c.arguments, tool_result=c.result) for k, c in enumerate(tool_calls)]]
    return Sample(id=f"s{i}", question=f"Do the task {mark}", answer=answer and f"{answer} {mark}", trace=trace)


def ours(srv, entry, samples):
    req = resolve(entry)
    opts = {"judge": "openai:gpt-4o-mini", "judge_base_url": srv.url, "judge_api_key_env": "PARITY_KEY",
            "judge_backoff_base": 0.01, "judge_backoff_max": 0.02, "judge_parse_retries": 0}
    ctx = ScoringContext(opts)
    try:
        req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        return req.spec.fn(samples, ctx, **req.params)
    finally:
        ctx.close()


def theirs(metric, s: Sample, *, with_trace: bool):
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.test_case import LLMTestCase
    from deepeval.test_case import ToolCall as DeCall

    tc = LLMTestCase(input=s.question, actual_output=s.answer,
                     tools_called=[DeCall(name=c.name, input_parameters=c.arguments, output=c.result)
                                   for c in s.trace.tool_calls])
    if with_trace:
        tc._trace_dict = deepeval_trace_tree(s.trace)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = metric.measure(tc, _show_indicator=False)
    except MissingTestCaseParamsError:
        return None, None
    return float(value), metric.success


def check(srv, name, cls, samples, params, *, with_trace=lambda s: True, metric_kw=None):
    got = ours(srv, {"name": name, "params": params}, samples)
    seen = set()
    for s, sc in zip(samples, got, strict=True):
        metric = cls(model=deepeval_model(srv), async_mode=False, include_reason=False, **params, **(metric_kw or {}))
        want, success = theirs(metric, s, with_trace=with_trace(s))
        if want is None:
            assert sc.value is None and "DeepEval refuses" in sc.reason, (s.id, sc)
            continue
        assert sc.value == pytest.approx(want, rel=1e-6, abs=1e-12), (name, params, s.id, sc, want)
        assert sc.details["success"] is success, (s.id, sc.details)
        seen.add(round(want, 6))
    assert params.get("strict_mode") or len(seen) >= 3, seen


def test_version():
    assert deepeval.__version__ == "4.3.1"


@pytest.mark.parametrize("params", [*PARAMS, {"task": "Book the cheapest ferry."}])
def test_task_completion(srv, params):
    from deepeval.metrics import TaskCompletionMetric

    samples = [traced(srv.case("task", v), i, spans=i % 2 == 0) for i, v in enumerate([1.0, 0.85, 0.3, 0.0, 0.5])]
    samples.append(traced(srv.case("task", 1.0), 9, answer=""))  # refused
    # DeepEval reads a test case's trace when it has one, else its input, output and tools
    check(srv, "deepeval:task_completion", TaskCompletionMetric, samples, params,
          with_trace=lambda s: bool(s.trace.spans))


@pytest.mark.parametrize("params", PARAMS)
def test_step_efficiency(srv, params):
    from deepeval.metrics import StepEfficiencyMetric

    samples = [traced(srv.case("efficiency", v), i, spans=i % 2 == 1) for i, v in enumerate([1.0, 0.75, 0.25, 0.0])]
    samples.append(traced(srv.case("efficiency", 0.5), 8, calls=0, spans=False))
    samples.append(traced(srv.case("efficiency", 1.0), 9, answer=""))
    check(srv, "deepeval:step_efficiency", StepEfficiencyMetric, samples, params)


@pytest.mark.parametrize("cls_name", ["PlanAdherenceMetric", "PlanQualityMetric"])
@pytest.mark.parametrize("params", PARAMS)
def test_plan_adherence_and_quality(srv, params, cls_name):
    import deepeval.metrics as dm

    cases = [(3, 1.0), (2, 0.75), (1, 0.25), (0, 0.0), (4, 0.5)]  # no plan: 1 whatever the score
    samples = [traced(srv.case("plan", v), i, spans=i != 2) for i, v in enumerate(cases)]
    samples.append(traced(srv.case("plan", (1, 1.0)), 9, answer=""))
    name = {"PlanAdherenceMetric": "deepeval:plan_adherence", "PlanQualityMetric": "deepeval:plan_quality"}[cls_name]
    check(srv, name, getattr(dm, cls_name), samples, params)


@pytest.mark.parametrize("params", PARAMS)
def test_argument_correctness(srv, params):
    from deepeval.metrics import ArgumentCorrectnessMetric

    verdicts = [["yes", "no"], ["yes", "yes", "yes"], ["no"], [], ["no", "no", "yes", "yes"]]
    samples = [traced(srv.case("arguments", v), i, calls=len(v)) for i, v in enumerate(verdicts)]
    check(srv, "deepeval:argument_correctness", ArgumentCorrectnessMetric, samples, params)
