"""DeepEval 4.3.1's MCP metrics of a conversation with DeepEval's numbers: ``deepeval:mcp_task_completion``
(MCPTaskCompletionMetric) and ``deepeval:multi_turn_mcp_use`` (MultiTurnMCPUseMetric), one value per
conversation.

DeepEval's ``ConversationalTestCase.mcp_servers`` is the conversation's ``metadata.mcp_servers``
(read from the row's ``mcp_servers``); a turn's ``mcp_tools_called`` / ``mcp_resources_called`` /
``mcp_prompts_called`` its metadata, and its tool calls of ``type`` ``MCP`` count as MCP tool calls,
as in DeepEval. A task is a unit interaction of three turns or more (DeepEval skips shorter ones):
its opening user messages, then its steps, each later turn either the MCP calls it made (marked
as not shown to the user; DeepEval then leaves the turn's text out) or its text as a response.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragmeter.conversations.model import Conversation, Turn
from ragmeter.core.schema import Score
from ragmeter.metrics.conversation._base import ConversationJudge, Item, dialogue, numbered
from ragmeter.metrics.conversation.deepeval_conv import register
from ragmeter.metrics.conversation.judged import unit_interactions
from ragmeter.metrics.judge.deepeval_mcp import PrimitiveScores, min_of_two, primitives_used, servers_text
from ragmeter.metrics.judge.deepeval_metrics import deepeval_params

_MCP_KEYS = ("mcp_tools_called", "mcp_resources_called", "mcp_prompts_called")


class TaskScore(BaseModel):
    model_config = ConfigDict(extra="ignore")
    reason: str
    score: float = Field(ge=0, le=1)


def _mcp_calls(t: Turn) -> list[dict[str, Any]] | None:
    """The turn's MCP tool calls, or ``None`` when the turn made no MCP call at all."""
    if t.metadata.get("mcp_tools_called") is not None:
        return [c for c in t.metadata["mcp_tools_called"] if isinstance(c, dict)]
    mcp = [{"name": c.name, "args": c.arguments, "result": c.result} for c in t.tool_calls
           if str((c.model_extra or {}).get("type", "")).upper() == "MCP"]
    if mcp or any(t.metadata.get(k) is not None for k in _MCP_KEYS[1:]):
        return mcp
    return None


def _step(pos: int, t: Turn) -> str:
    if t.role == "user":
        return f"Turn {pos + 1} (user):\n{t.content}"
    calls = _mcp_calls(t)
    if calls is None:
        return f"Turn {pos + 1}, response to the user:\n{t.content}"
    used = primitives_used(calls, t.metadata.get("mcp_resources_called"), t.metadata.get("mcp_prompts_called"))
    return f"Turn {pos + 1}, MCP calls (not shown to the user):\n{used}"


def _tasks(name: str, conv: Conversation, params: dict[str, Any], with_servers: bool) -> list[Item] | Score:
    deepeval_params(name)(params)
    servers = conv.metadata.get("mcp_servers")
    if not servers:
        return Score.missing("no mcp_servers: DeepEval refuses the test case ('mcp_servers' cannot be empty)")
    text = servers_text(servers)
    if text is None:
        return Score.missing("metadata.mcp_servers must be a list of MCP servers (objects with a server_name)")
    items = []
    for unit in unit_interactions(dialogue(conv)):
        if len(unit) <= 2:
            continue
        users = []
        for pt in unit:
            if pt[1].role != "user":
                break
            users.append(pt)
        blocks = [("USER TASK", numbered(users)), ("AGENT STEPS", "\n\n".join(_step(p, t) for p, t in unit[1:]))]
        items.append(Item(f"turn {unit[-1][0] + 1}", [("MCP SERVERS", text), *blocks] if with_servers else blocks,
                          data=unit[-1][0] + 1))
    return items or _no_task(params)


def _no_task(params: dict[str, Any]) -> Score:
    return min_of_two(0.0, params, {"tasks": [], "summary": "no task of three turns or more: DeepEval scores 0"})


# ---- MCP task completion --------------------------------------------------------------------------------
def _completion_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    value = sum(v.score for v in verdicts) / len(verdicts)
    return min_of_two(value, params, {"tasks": [{"turn": it.data, **v.model_dump()}
                                                for it, v in zip(items, verdicts, strict=True)],
                                      "summary": f"mean task score over {len(verdicts)} task(s)"})


register(ConversationJudge("deepeval:mcp_task_completion", "deepeval_mcp_task_completion", TaskScore,
                           lambda c, p: _tasks("deepeval:mcp_task_completion", c, p, False), _completion_score,
                           output_tokens=100),
         "MCPTaskCompletionMetric",
         description="""DeepEval's MCP task completion (MCPTaskCompletionMetric): for each task of the conversation
         (a unit interaction of three turns or more) the judge scores from 0 to 1 whether the user's task was
         completed as the user saw it, reading the agent's responses and its MCP calls (marked as hidden
         from the user). Score = mean task score; 0 without a task (as DeepEval); strict_mode: 0 below 1;
         no mcp_servers is no value (DeepEval refuses). One value per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 MCPTaskCompletionMetric given the same task scores: its tasks (unit interactions "
                "longer than two turns), its steps (a turn with MCP calls shows only its calls), the mean with "
                "0 for none, strict_mode and threshold; the same one request per task.")


# ---- multi-turn MCP use ---------------------------------------------------------------------------------
def _use_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    prim = sum(v.primitives_score for v in verdicts) / len(verdicts)
    args = sum(v.arguments_score for v in verdicts) / len(verdicts)
    return min_of_two(min(prim, args), params, {
        "tasks": [{"turn": it.data, **v.model_dump()} for it, v in zip(items, verdicts, strict=True)],
        "summary": f"the lower of the mean primitive and mean argument scores over {len(verdicts)} task(s)"})


register(ConversationJudge("deepeval:multi_turn_mcp_use", "deepeval_multi_turn_mcp_use", PrimitiveScores,
                           lambda c, p: _tasks("deepeval:multi_turn_mcp_use", c, p, True), _use_score,
                           output_tokens=200),
         "MultiTurnMCPUseMetric",
         description="""DeepEval's multi-turn MCP use (MultiTurnMCPUseMetric): for each task of the conversation (a
         unit interaction of three turns or more) the judge scores from 0 to 1 whether the MCP primitives the
         agent used were the right ones among its servers' and whether their arguments were correct. Score
         = min(mean primitive score, mean argument score); 0 without a task (as DeepEval); strict_mode: 0
         below 1; no mcp_servers is no value (DeepEval refuses). One value per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 MultiTurnMCPUseMetric given the same scores: its tasks and steps, the min of "
                "the two means with 0 for none, strict_mode and threshold; DeepEval asks the two questions in "
                "two calls per task, ragmeter in one.")
