"""DeepEval 4.3.1's deterministic agent metrics against DeepEval itself, on 200 generated inputs
each: ``deepeval:tool_correctness`` (ToolCorrectnessMetric, every option), ``deepeval:tool_permission``
(ToolPermissionMetric) and ``deepeval:agent_loop_detection`` (AgentLoopDetectionMetric on a span
tree). No judge is involved: the numbers must be equal."""

from __future__ import annotations

import os
import random
import warnings

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from ragmeter.core.context import ScoringContext  # noqa: E402
from ragmeter.core.schema import AgentTrace, Sample, ToolCall, TraceSpan  # noqa: E402
from ragmeter.metrics.registry import resolve  # noqa: E402

N = 200


def ours(entry, samples):
    req = resolve(entry)
    return [s.value for s in req.spec.fn(samples, ScoringContext({}), **req.params)]


def _model():
    from deepeval.models import GPTModel

    return GPTModel(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="parity")


def measure(metric, **fields):
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.test_case import LLMTestCase

    trace = fields.pop("_trace", None)
    try:
        tc = LLMTestCase(**fields)
        if trace is not None:
            tc._trace_dict = trace
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(metric.measure(tc, _show_indicator=False))
    except MissingTestCaseParamsError:
        return None


def test_version():
    assert deepeval.__version__ == "4.3.1"


# ---- tool correctness -------------------------------------------------------------------------------
def _args(rng):
    return {k: rng.choice([1, 2, "x", {"a": rng.choice([1, 2])}]) for k in rng.sample("pqr", rng.randint(0, 3))}


def _calls(rng, n_max):
    return [{"name": rng.choice("abcd"), "input_parameters": _args(rng), "output": rng.choice([None, "ok", 3])}
            for _ in range(rng.randint(0, n_max))]


OPTIONS = [{}, {"should_consider_ordering": True}, {"should_exact_match": True},
           {"evaluation_params": ["input_parameters"]}, {"evaluation_params": ["output"]},
           {"evaluation_params": ["input_parameters", "output"], "should_consider_ordering": True},
           {"evaluation_params": ["input_parameters"], "should_exact_match": True},
           {"strict_mode": True}, {"threshold": 0.8, "should_consider_ordering": True}]


@pytest.mark.parametrize("params", OPTIONS)
def test_tool_correctness_equals_deepeval(params):
    from deepeval.metrics import ToolCorrectnessMetric
    from deepeval.test_case import ToolCall as DeCall
    from deepeval.test_case import ToolCallParams

    rng = random.Random(hash(str(params)) % 1000)
    de_params = dict(params)
    if "evaluation_params" in de_params:
        de_params["evaluation_params"] = [ToolCallParams(p) for p in de_params["evaluation_params"]]
    cases = [([], []), ([{"name": "a", "input_parameters": {}}], []), ([], [{"name": "a", "input_parameters": {}}]),
             ([{"name": "a", "input_parameters": {}}] * 2, [{"name": "a", "input_parameters": {}}] * 2)]
    cases += [(_calls(rng, 4), _calls(rng, 5)) for _ in range(N)]
    samples = [Sample(id=f"s{i}", question="q", metadata={"expected_tools": exp},
                      trace=AgentTrace(tool_calls=[ToolCall(name=c["name"], arguments=c["input_parameters"],
                                                            result=c.get("output")) for c in called]))
               for i, (exp, called) in enumerate(cases)]
    got = ours({"name": "deepeval:tool_correctness", "params": params}, samples)
    metric = ToolCorrectnessMetric(model=_model(), async_mode=False, include_reason=False, **de_params)
    for (exp, called), value in zip(cases, got, strict=True):
        want = measure(metric, input="q", actual_output="a", tools_called=[DeCall(**c) for c in called],
                       expected_tools=[DeCall(**c) for c in exp])
        assert value == pytest.approx(want, rel=1e-9, abs=1e-12), (params, exp, called)


def test_tool_correctness_names_and_refusals():
    got = ours("ToolCorrectnessMetric", [
        Sample(id="1", question="q", metadata={"expected_tools": ["a", "b"]}, trace=AgentTrace(tool_calls=[ToolCall(name="b")])),
        Sample(id="2", metadata={"expected_tools": ["a"]}, trace=AgentTrace()),
        Sample(id="3", question="q", trace=AgentTrace()),
        Sample(id="4", question="q", metadata={"expected_tools": "a"}, trace=AgentTrace())])
    assert got == [0.5, None, None, None]


# ---- tool permission --------------------------------------------------------------------------------
def test_tool_permission_equals_deepeval():
    from deepeval.metrics import ToolPermissionMetric
    from deepeval.test_case import ToolCall as DeCall

    rng = random.Random(7)
    for k in range(N):
        allowed = None if k % 3 == 0 else rng.sample("abcde", rng.randint(0, 4))
        denied = None if k % 3 == 1 else rng.sample("abcde", rng.randint(0, 3))
        strict = k % 5 == 0
        names = [rng.choice("abcdef") for _ in range(rng.randint(0, 6))]
        sample = Sample(id="s", question="q", trace=AgentTrace(tool_calls=[ToolCall(name=n) for n in names]))
        (value,) = ours({"name": "deepeval:tool_permission",
                         "params": {"allowed_tools": allowed, "denied_tools": denied, "strict_mode": strict}}, [sample])
        metric = ToolPermissionMetric(allowed_tools=allowed, denied_tools=denied, strict_mode=strict)
        want = measure(metric, input="q", actual_output="a", tools_called=[DeCall(name=n) for n in names])
        assert value == want, (allowed, denied, names, strict)


def test_tool_permission_needs_a_policy():
    from ragmeter.core.errors import MetricError

    with pytest.raises(MetricError, match="allowed_tools"):
        ours("deepeval:tool_permission", [Sample(id="s", question="q", trace=AgentTrace())])


# ---- agent loop detection ---------------------------------------------------------------------------
_WORDS = ("search database query result found customer account balance retry again lookup record "
          "checking response failed timeout calling service weather london paris").split()


def _text(rng):
    base = [rng.choice(_WORDS) for _ in range(rng.randint(5, 40))]
    return " ".join(base)


def _tree(rng, depth=0):
    """(ragmeter spans of a generated tree, DeepEval's dict of it)."""
    kind = rng.choice(["agent", "llm", "tool", "tool", "retriever", "chain"])
    name = rng.choice(["plan", "search", "fetch"])
    inp = rng.choice([{"q": rng.choice([1, 2])}, "same input", None])
    out = _text(rng) if kind == "llm" else rng.choice([None, "done"])
    node = {"type": kind if kind != "chain" else "base", "name": name}
    if inp is not None:
        node["input"] = inp
    if out is not None:
        node["output"] = out
    node["children"] = []
    spans = [dict(kind=kind, name=name, input=inp, output=out)]
    if depth < 3:
        for _ in range(rng.randint(0, 3 if depth == 0 else 2)):
            sub, child = _tree(rng, depth + 1)
            node["children"].append(child)
            spans.append(sub)
    return spans, node


def _flatten(spans, parent=None, out=None):
    out = [] if out is None else out
    head, *children = spans
    sid = f"sp{len(out)}"
    out.append(TraceSpan(span_id=sid, parent_id=parent, kind=head["kind"], name=head["name"], input=head["input"],
                         output=head["output"]))
    for ch in children:
        _flatten(ch, sid, out)
    return out


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}, {"repetition_threshold": 2},
                                    {"check_reasoning_stagnation": False, "similarity_threshold": 0.5},
                                    {"check_tool_repetition": False, "check_call_graph_cycles": False,
                                     "check_reasoning_stagnation": False}])
def test_agent_loop_detection_equals_deepeval(params):
    from deepeval.metrics import AgentLoopDetectionMetric

    rng = random.Random(11 + len(str(params)))
    samples, trees = [], []
    for i in range(N):
        spans, tree = _tree(rng)
        if i % 4 == 0:  # repeated identical LLM reasoning and repeated tool calls
            long = " ".join(_WORDS) + " " + " ".join(reversed(_WORDS))
            k = rng.randint(1, 7)
            tree["children"] += [{"type": "llm", "name": "think", "output": long, "children": []}] * 2
            tree["children"] += [{"type": "tool", "name": "search", "input": {"q": 1}, "children": []}] * k
            spans += [[{"kind": "llm", "name": "think", "input": None, "output": long}]] * 2
            spans += [[{"kind": "tool", "name": "search", "input": {"q": 1}, "output": None}]] * k
        trace = AgentTrace(spans=_flatten(spans))
        samples.append(Sample(id=f"s{i}", question="q", answer="a", trace=trace))
        trees.append(tree)
    got = ours({"name": "deepeval:agent_loop_detection", "params": params}, samples)
    for tree, value in zip(trees, got, strict=True):
        metric = AgentLoopDetectionMetric(async_mode=False, include_reason=False, **params)
        want = measure(metric, input="q", actual_output="a", _trace=tree)
        assert value == pytest.approx(want, rel=1e-9), tree


def test_agent_loop_detection_of_tool_calls_and_empty_answers():
    from deepeval.metrics import AgentLoopDetectionMetric

    calls = [ToolCall(name="search", arguments={"q": 1})] * 3
    got = ours("deepeval:agent_loop_detection", [
        Sample(id="1", question="q", answer="a", trace=AgentTrace(tool_calls=calls, input_text="q")),
        Sample(id="2", question="q", answer="", trace=AgentTrace(tool_calls=calls)),
        Sample(id="3", question="q", answer="a", trace=AgentTrace())])
    tree = {"type": "agent", "name": "agent", "input": "q",
            "children": [{"type": "tool", "name": "search", "input": {"q": 1}, "children": []}] * 3}
    want = measure(AgentLoopDetectionMetric(async_mode=False), input="q", actual_output="a", _trace=tree)
    assert got[0] == pytest.approx(want) == pytest.approx((0.4 * 0.5 + 0.35 + 0.25) / 1.0)
    assert got[1] is None
    assert got[2] == 1.0
