"""DeepEval 4.3.1's MCP metrics against DeepEval itself, given the same scores: ``deepeval:mcp_use``
(MCPUseMetric, a test case), ``deepeval:mcp_task_completion`` and ``deepeval:multi_turn_mcp_use``
(MCPTaskCompletionMetric, MultiTurnMCPUseMetric, a conversation).

One scripted OpenAI-compatible server answers ragmeter's one request per test case or task and
DeepEval's own steps from one script per sample. MCP calls are DeepEval ``ToolCall`` objects of type
``MCP`` (``mcp_tools_called`` needs the ``mcp`` package, which DeepEval does not install). Equal
within 1e-6 with DeepEval's ``success``, with ``strict_mode`` and ``threshold``, conversations
without a task (DeepEval's 0) and without ``mcp_servers`` or answer (refused).
"""

from __future__ import annotations

import os
import re
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
from parity_deepeval_conv_support import ours as ours_conv  # noqa: E402
from parity_server import Case, ParityServer  # noqa: E402
from ragmeter.conversations import parse_conversation  # noqa: E402
from ragmeter.core.context import ScoringContext  # noqa: E402
from ragmeter.core.schema import AgentTrace, Sample, ToolCall  # noqa: E402
from ragmeter.metrics.registry import resolve  # noqa: E402

PARAMS = [{}, {"strict_mode": True}, {"threshold": 0.8}]
SERVERS = [{"server_name": "ferries", "transport": "stdio",
            "available_tools": [{"name": "timetable", "description": "ferry departures",
                                 "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}}],
            "available_resources": [{"uri": "file:///routes.json", "name": "routes"}]}]
_TAG = re.compile(r"\[t(\d+)\]")


class McpServer(ParityServer):
    """Kinds: ``mcp_use`` ``(primitives score, arguments score)``; ``mcp_task`` ``{first turn of a task:
    score}``; ``mcp_multi`` ``{first turn of a task: (primitives score, arguments score)}``."""

    def _ragmeter(self, case: Case, schema: str, system: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "mcp_use" and schema == "PrimitiveScores":
            return {"primitives_reason": "s", "primitives_score": v[0], "arguments_reason": "s", "arguments_score": v[1]}
        if case.kind == "mcp_task" and schema == "TaskScore":
            return {"reason": "s", "score": v[min(int(x) for x in _TAG.findall(user))]}
        if case.kind == "mcp_multi" and schema == "PrimitiveScores":
            p, a = v[min(int(x) for x in _TAG.findall(user))]
            return {"primitives_reason": "s", "primitives_score": p, "arguments_reason": "s", "arguments_score": a}
        return super()._ragmeter(case, schema, system, user, mark)

    def _deepeval(self, case: Case, schema: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "mcp_use" and schema in ("MCPPrimitivesScore", "MCPArgsScore"):
            return {"score": v[0] if schema == "MCPPrimitivesScore" else v[1], "reason": "s"}
        if case.kind in ("mcp_task", "mcp_multi") and schema in ("TaskScore", "ToolScore", "ArgsScore"):
            first = min(int(x) for x in _TAG.findall(user.rsplit("User Task:", 1)[1]))
            got = v[first]
            score = got if case.kind == "mcp_task" else got[0] if schema == "ToolScore" else got[1]
            return {"score": score, "reason": "s"}
        return super()._deepeval(case, schema, user, mark)


@pytest.fixture(scope="module")
def srv():
    s = McpServer().start()
    yield s
    s.stop()


def test_version():
    assert deepeval.__version__ == "4.3.1"


# ---- MCP use of a test case ------------------------------------------------------------------------------
def _sample(mark: str, i: int, *, servers: Any = SERVERS, answer: str = "The 10:00 ferry.") -> Sample:
    meta: dict[str, Any] = {"mcp_resources_called": [{"uri": "file:///routes.json", "result": f"routes {mark}"}]}
    if servers is not None:
        meta["mcp_servers"] = servers
    return Sample(id=f"s{i}", question=f"When is the ferry to Halden? {mark}", answer=answer and f"{answer} {mark}",
                  metadata=meta, trace=AgentTrace(tool_calls=[ToolCall(name="timetable", arguments={"to": "Halden"},
                                                                       result=f"10:00 {mark}", type="MCP")]))


@pytest.mark.parametrize("params", PARAMS)
def test_mcp_use(srv, params):
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.metrics import MCPUseMetric
    from deepeval.test_case import LLMTestCase, MCPServer
    from deepeval.test_case import ToolCall as DeCall

    scores = [(1.0, 0.75), (0.5, 1.0), (0.0, 0.25), (0.75, 0.75)]
    samples = [_sample(srv.case("mcp_use", v), i) for i, v in enumerate(scores)]
    samples += [_sample(srv.case("mcp_use", (1.0, 1.0)), 8, servers=None),
                _sample(srv.case("mcp_use", (1.0, 1.0)), 9, answer="")]
    req = resolve({"name": "deepeval:mcp_use", "params": params})
    opts = {"judge": "openai:gpt-4o-mini", "judge_base_url": srv.url, "judge_api_key_env": "PARITY_KEY",
            "judge_parse_retries": 0}
    ctx = ScoringContext(opts)
    try:
        req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        got = req.spec.fn(samples, ctx, **req.params)
    finally:
        ctx.close()
    seen = set()
    for s, sc in zip(samples, got, strict=True):
        servers = s.metadata.get("mcp_servers")
        tc = LLMTestCase(input=s.question, actual_output=s.answer,
                         mcp_servers=None if servers is None else [MCPServer(**x) for x in servers],
                         tools_called=[DeCall(name=c.name, input_parameters=c.arguments, output=c.result, type="MCP")
                                       for c in s.trace.tool_calls])
        metric = MCPUseMetric(model=deepeval_model(srv), async_mode=False, include_reason=False, **params)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = float(metric.measure(tc, _show_indicator=False))
        except MissingTestCaseParamsError:
            assert sc.value is None and "DeepEval refuses" in sc.reason, (s.id, sc)
            continue
        assert sc.value == pytest.approx(want, rel=1e-6, abs=1e-12), (s.id, params, sc, want)
        assert sc.details["success"] is metric.success
        seen.add(want)
    assert params.get("strict_mode") or len(seen) >= 3


# ---- MCP metrics of a conversation --------------------------------------------------------------------------
def _conversation(mark: str, roles: str, mcp_turns: set[int], *, servers: Any = SERVERS, cid: str = "c"):
    """A DeepEval ConversationalTestCase JSON (``model_dump`` shape) read by ragmeter's reader, and the
    DeepEval test case itself."""
    from deepeval.test_case import ConversationalTestCase, MCPServer
    from deepeval.test_case import ToolCall as DeCall
    from deepeval.test_case import Turn as DeTurn

    turns = []
    for i, r in enumerate(roles, 1):
        t: dict[str, Any] = {"role": "user" if r == "u" else "assistant", "content": f"message {i} [t{i}] {mark}"}
        if i in mcp_turns:
            t["tools_called"] = [{"name": "timetable", "type": "MCP", "input_parameters": {"to": f"x{i}"},
                                  "output": f"10:0{i} {mark}"}]
        turns.append(t)
    row = {"id": cid, "turns": turns, **({"mcp_servers": servers} if servers is not None else {})}
    tc = ConversationalTestCase(
        turns=[DeTurn(role=t["role"], content=t["content"],
                      tools_called=[DeCall(**c) for c in t["tools_called"]] if "tools_called" in t else None)
               for t in turns],
        mcp_servers=None if servers is None else [MCPServer(**x) for x in servers])
    return parse_conversation(row), tc


CONVS = [("uaaua", {2}, {1: 1.0}),  # one task of three turns (the second unit has two: skipped)
         ("uaauaa", {2, 5}, {1: 0.5, 4: 0.25}),
         ("uaua", set(), {}),  # no unit longer than two turns: DeepEval's 0
         ("uuaa", {3, 4}, {1: 0.75})]


def _check(srv, name, cls, kind, values, params):
    from deepeval.errors import MissingTestCaseParamsError

    pairs = [_conversation(srv.case(kind, values(i)), roles, mcp, cid=f"m{i}") for i, (roles, mcp, _) in enumerate(CONVS)]
    pairs.append(_conversation(srv.case(kind, {}), "uaa", {2}, servers=None, cid="no-servers"))
    got = ours_conv(srv, {"name": name, "params": params}, [c for c, _ in pairs])
    seen = set()
    for (conv, tc), sc in zip(pairs, got, strict=True):
        metric = cls(model=deepeval_model(srv), async_mode=False, include_reason=False, **params)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = float(metric.measure(tc, _show_indicator=False))
        except MissingTestCaseParamsError:
            assert sc.value is None and "DeepEval refuses" in sc.reason, (conv.id, sc)
            continue
        assert sc.value == pytest.approx(want, rel=1e-6, abs=1e-12), (name, params, conv.id, sc, want)
        assert sc.details["success"] is metric.success
        seen.add(round(want, 6))
    assert 0.0 in seen and (params.get("strict_mode") or len(seen) >= 3), seen


@pytest.mark.parametrize("params", PARAMS)
def test_mcp_task_completion(srv, params):
    from deepeval.metrics import MCPTaskCompletionMetric

    _check(srv, "deepeval:mcp_task_completion", MCPTaskCompletionMetric, "mcp_task",
           lambda i: CONVS[i][2] if i < len(CONVS) else {}, params)


@pytest.mark.parametrize("params", PARAMS)
def test_multi_turn_mcp_use(srv, params):
    from deepeval.metrics import MultiTurnMCPUseMetric

    multi = [{1: (1.0, 0.5)}, {1: (0.5, 1.0), 4: (0.25, 0.75)}, {}, {1: (0.75, 1.0)}]
    _check(srv, "deepeval:multi_turn_mcp_use", MultiTurnMCPUseMetric, "mcp_multi",
           lambda i: multi[i] if i < len(multi) else {}, params)
