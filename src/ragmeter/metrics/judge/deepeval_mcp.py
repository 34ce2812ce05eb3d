"""DeepEval 4.3.1's MCP use of one test case with DeepEval's number: ``deepeval:mcp_use``
(MCPUseMetric), and what the MCP metrics of a conversation share (the servers and the primitives
used, as the judge sees them).

DeepEval's ``LLMTestCase`` MCP fields as ragmeter reads them from a row: ``mcp_servers`` (a list of
``{server_name, transport, available_tools, available_resources, available_prompts}``, the tools as
MCP ``Tool`` objects: ``name``, ``description``, ``inputSchema``), ``mcp_tools_called``
(``{name, args, result}``; DeepEval falls back to ``tools_called``, here the trace's tool calls),
``mcp_resources_called`` (``{uri, result}``) and ``mcp_prompts_called`` (``{name, result}``), kept in
the sample's metadata.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import JudgedMetric, Verdict, judge_check, tool_equals
from ragmeter.metrics.judge.deepeval_metrics import deepeval_params
from ragmeter.metrics.registry import MetricSpec, register_metric

DEFAULTS: dict[str, Any] = {"threshold": 0.5, "strict_mode": False}


class PrimitiveScores(Verdict):
    primitives_reason: str
    primitives_score: float = Field(ge=0, le=1)
    arguments_reason: str
    arguments_score: float = Field(ge=0, le=1)


def _dump(x: Any) -> str:
    return json.dumps(x, indent=2, ensure_ascii=False, default=str)


def servers_text(raw: Any) -> str | None:
    """The MCP servers as the judge reads them, or ``None`` when they are not a list of servers."""
    if not isinstance(raw, list) or not all(isinstance(s, Mapping) for s in raw):
        return None
    keep = ("server_name", "transport", "available_tools", "available_resources", "available_prompts")
    return _dump([{k: s[k] for k in keep if s.get(k) is not None} for s in raw])


def _list(raw: Any) -> list[Mapping[str, Any]]:
    return [x for x in raw if isinstance(x, Mapping)] if isinstance(raw, list) else []


def primitives_used(tools: list[Mapping[str, Any]], resources: Any, prompts: Any) -> str:
    """The primitives an agent called (tools with arguments and results, resources, prompts)."""
    out: dict[str, Any] = {"tools": [{"name": t.get("name"), "arguments": t.get("args", t.get("arguments")),
                                      "result": t.get("result")} for t in tools]}
    if resources is not None:
        out["resources"] = [{"uri": r.get("uri"), "result": r.get("result")} for r in _list(resources)]
    if prompts is not None:
        out["prompts"] = [{"name": p.get("name"), "result": p.get("result")} for p in _list(prompts)]
    return _dump(out)


def _tools_of(s: Sample) -> list[Mapping[str, Any]]:
    if s.metadata.get("mcp_tools_called"):
        return _list(s.metadata["mcp_tools_called"])
    calls = s.trace.tool_calls if s.trace is not None else []
    return [{"name": c.name, "args": c.arguments, "result": c.result} for c in calls]


def _blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if s.answer == "":
        return Score.missing("empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)")
    servers = s.metadata.get("mcp_servers")
    if servers is None:
        return Score.missing("no mcp_servers: DeepEval refuses the test case ('mcp_servers' cannot be None)")
    text = servers_text(servers)
    if text is None:
        return Score.missing("metadata.mcp_servers must be a list of MCP servers (objects with a server_name)")
    used = primitives_used(_tools_of(s), s.metadata.get("mcp_resources_called"), s.metadata.get("mcp_prompts_called"))
    return [("INPUT", s.question or ""), ("ACTUAL OUTPUT", s.answer or ""), ("MCP SERVERS", text),
            ("PRIMITIVES USED", used)]


def min_of_two(value: float, p: dict[str, Any], details: dict[str, Any]) -> Score:
    strict = bool(p.get("strict_mode", False))
    threshold = 1.0 if strict else float(p.get("threshold", 0.5))
    if strict and value < threshold:
        value = 0.0
    details.update(threshold=threshold, strict_mode=strict, success=value >= threshold)
    return Score(value, details=details)


_mcp_use = JudgedMetric("deepeval:mcp_use", "deepeval_mcp_use", PrimitiveScores, _blocks,
                        lambda s, v, p, ctx: min_of_two(min(v.primitives_score, v.arguments_score), p, v.model_dump()),
                        output_tokens=lambda s: 200, check_params=deepeval_params("deepeval:mcp_use"))
register_metric(MetricSpec(
    name="deepeval:mcp_use", family="judge", fn=_mcp_use, requires=("question", "answer"), needs_llm=True,
    defaults=dict(DEFAULTS), prepare=_mcp_use.prepare, check=judge_check, batch_size=64, scope="trace",
    equals=tool_equals("deepeval", "MCPUseMetric"), aliases=("MCPUseMetric", "deepeval.metrics.MCPUseMetric"),
    description="""DeepEval's MCP use (MCPUseMetric): given the primitives of the test case's mcp_servers and the
    ones the agent called (mcp_tools_called, else the trace's tool calls; mcp_resources_called,
    mcp_prompts_called), the judge scores from 0 to 1 whether the right primitives were used and
    whether their arguments were correct. Score = the lower of the two; strict_mode: 0 below 1. No
    mcp_servers or an empty answer is no value (DeepEval refuses the test case). Needs a judge.""",
    parity="DeepEval 4.3.1 MCPUseMetric given the same two scores: min of them, strict_mode and threshold; "
           "DeepEval asks the two questions in two calls, ragmeter in one."))
