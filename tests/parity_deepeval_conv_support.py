"""What the DeepEval conversational parity tests share (tests/test_parity_deepeval_conversational.py):
the scripted server of tests/parity_server.py taught the steps of DeepEval's conversational metrics
and ragmeter's one-request form of each, and the two ways of scoring a conversation.

Every turn of a scripted conversation carries the case marker and its 1-based position ``[tN]``,
so a request about one turn (DeepEval asks per user turn, per assistant turn, per window) is
answered from the case by that position. Case kinds (``ParityServer.case(kind, verdicts)``):

- ``retention``: ``{"facts": {user turn: bool}, "checks": {assistant turn: "yes"/"no"}}`` (a user
  turn states facts or not; an assistant turn forgets them or not);
- ``relevancy``: ``{assistant turn: "yes"/"no"}``, the verdict of the window ending there;
- ``role``: ``[assistant turn, ...]`` listed as out of character (repeats allowed);
- ``completeness``: ``["yes", "no", ...]``, one verdict per user intention;
- ``goal``: ``{last turn of an exchange: (goal score, plan score)}``;
- ``topic``: ``{last turn of an exchange: ["TP", "FN", ...]}``, one verdict per question-answer pair;
- the per-window RAG metrics (:func:`rag_conversation`: the retrieval contexts of assistant turn N are
  labelled ``[cN.k]``): ``tprec`` ``{"N.k": "yes"/"no"}`` (is the context useful), ``trec``
  ``{last context turn of the window: ["yes", "no", ...]}`` (the expected outcome's statements
  attributed), ``trel`` ``{"N.k": ["yes", ...]}`` (the context's statements relevant), ``tfaith``
  ``{last turn of the window: ["supported", "contradicted", "not_found", ...]}`` (its claims);
- ``tooluse``: ``{last turn of an exchange: (selection score, argument score)}``.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

from parity_server import Case, ParityServer
from ragmeter.conversations.model import Conversation, Turn, to_samples
from ragmeter.core.context import ScoringContext
from ragmeter.metrics.registry import resolve
from references import require_reference

require_reference("deepeval")  # imported only by the DeepEval parity tests, which require it too
pytestmark = pytest.mark.contract

_TAG = re.compile(r"\[t(\d+)\]")
_CTX_LABEL = re.compile(r"\[c(\d+\.\d+)\]")
_DE_CLAIM = {"supported": "yes", "contradicted": "no", "not_found": "borderline"}


def _tags(text: str) -> list[int]:
    return [int(x) for x in _TAG.findall(text)]


class ConversationServer(ParityServer):
    """:class:`ParityServer` with the conversational cases above."""

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        # DeepEval asks a few things of no scripted text: the goal-accuracy reason of a conversation
        # without an exchange, the truths of a window without a retrieval context
        text = "".join(str(m.get("content")) for m in body.get("messages", []))
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        if "[[C" not in text and (schema in ("Truths", "Reason") or "final justification" in text):
            content = {"Truths": '{"truths": []}', "Reason": '{"reason": "scripted"}'}.get(schema, "scripted")
            return {"id": "chatcmpl-parity", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        return super().answer(path, body)

    def _ragmeter(self, case: Case, schema: str, system: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "retention" and schema == "RetentionReport":
            turns = _tags(user)
            return {"user_turns": [{"turn": t, "facts": {f"fact {t}": "x"} if v["facts"][t] else {}}
                                   for t in turns if t in v["facts"]],
                    "assistant_turns": [{"turn": t, "reason": "scripted", "verdict": v["checks"][t]}
                                        for t in turns if t in v["checks"]]}
        if case.kind == "relevancy" and schema == "TurnRelevanceVerdict":
            return {"reason": "scripted", "verdict": v[max(_tags(user))]}
        if case.kind == "role" and schema == "RoleVerdicts":
            return {"verdicts": [{"turn": t, "reason": "scripted"} for t in v]}
        if case.kind == "completeness" and schema == "CompletenessVerdicts":
            return {"intentions": [{"intention": f"intention {i}", "reason": "scripted", "verdict": x}
                                   for i, x in enumerate(v)]}
        if case.kind == "goal" and schema == "GoalPlanScores":
            g, p = v[max(_tags(user))]
            return {"goal_reason": "scripted", "goal_score": g, "plan_reason": "scripted", "plan_score": p}
        if case.kind == "topic" and schema == "QAPairVerdicts":
            u = max(_tags(user))
            return {"qa_pairs": [{"question": f"q{u}_{i}", "response": "r", "reason": "scripted", "verdict": x}
                                 for i, x in enumerate(v.get(u, []))]}
        if case.kind == "tooluse" and schema == "ToolUseScores":
            sel, arg = v[max(_tags(user))]
            return {"selection_reason": "scripted", "selection_score": sel, "argument_reason": "scripted",
                    "argument_score": arg}
        labels = _CTX_LABEL.findall(user)
        if case.kind == "tprec" and schema == "ContextVerdicts":
            return {"verdicts": [{"context": i, "reason": "scripted", "verdict": v[x]} for i, x in enumerate(labels, 1)]}
        if case.kind == "trec" and schema == "ReferenceAttribution":
            return {"statements": [{"statement": f"s{i} {mark}", "reason": "scripted", "verdict": x}
                                   for i, x in enumerate(v[_last(labels)])]}
        if case.kind == "trel" and schema == "ContextStatementVerdicts":
            return {"contexts": [{"context": i, "statements": [{"statement": f"s{j} {mark}", "reason": "", "verdict": y}
                                                               for j, y in enumerate(v[x])]}
                                 for i, x in enumerate(labels, 1)]}
        if case.kind == "tfaith" and schema == "ClaimVerdicts":
            return {"claims": [{"claim": f"claim {i} {mark}", "reason": "scripted", "verdict": x}
                               for i, x in enumerate(v[max(_tags(user))])]}
        return super()._ragmeter(case, schema, system, user, mark)

    def _deepeval(self, case: Case, schema: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "retention":
            if schema == "Knowledge":
                t = _tags(user.rsplit("Latest User Message:", 1)[1])[0]
                return {"data": {f"fact {t}": "x"} if v["facts"][t] else {}}
            if schema == "KnowledgeRetentionVerdict":
                t = _tags(user.rsplit("LLM message:", 1)[1].split("Previous Knowledge:")[0])[0]
                return {"verdict": v["checks"][t], "reason": "scripted"}
        if case.kind == "relevancy" and schema == "TurnRelevancyVerdict":
            return {"verdict": v[max(_tags(user.rsplit("Messages:", 1)[1]))], "reason": "scripted"}
        if case.kind == "role" and schema == "OutOfCharacterResponseVerdicts":
            return {"verdicts": [{"index": t - 1, "reason": "scripted"} for t in v]}
        if case.kind == "completeness":
            if schema == "UserIntentions":
                return {"intentions": [f"intention {i}" for i in range(len(v))]}
            if schema == "ConversationCompletenessVerdict":
                i = int(re.findall(r"intention (\d+)", user.rsplit("User Intention:", 1)[1])[0])
                return {"verdict": v[i], "reason": "scripted"}
        if case.kind == "goal":
            if schema in ("GoalScore", "PlanScore"):
                g, p = v[max(_tags(user.rsplit("USER TASK:", 1)[1]))]
                return {"score": g if schema == "GoalScore" else p, "reason": f"scripted {mark}"}
            if schema == "":  # DeepEval's final reason, asked without a schema
                return {"reason": "scripted"}
        if case.kind == "topic":
            if schema == "QAPairs":
                u = max(_tags(user.rsplit("Conversation: ", 1)[1]))
                return {"qa_pairs": [{"question": f"q{u}_{i} {mark}", "response": "r"} for i in range(len(v.get(u, [])))]}
            if schema == "RelevancyVerdict":
                u, i = (int(x) for x in re.findall(r"q(\d+)_(\d+)", user)[0])
                return {"verdict": v[u][i], "reason": "scripted"}
        if case.kind == "tooluse":
            if schema in ("ToolSelectionScore", "ArgumentCorrectnessScore"):
                sel, arg = v[max(_tags(user.rsplit("USER INPUT:", 1)[1]))]
                return {"score": sel if schema == "ToolSelectionScore" else arg, "reason": f"scripted {mark}"}
            if schema == "Reason":
                return {"reason": "scripted"}
        labels = _CTX_LABEL.findall(user)
        if case.kind == "tprec" and schema == "Verdicts":
            return {"verdicts": [{"verdict": v[x], "reason": "scripted"} for x in labels]}
        if case.kind == "trec" and schema == "Verdicts":
            return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in v[_last(labels)]]}
        if case.kind == "trel" and schema == "ContextualRelevancyVerdicts":
            return {"verdicts": [{"statement": f"s{j} {mark}", "verdict": y, "reason": "scripted"}
                                 for j, y in enumerate(v[labels[0]])]}
        if case.kind == "tfaith":
            if schema == "Truths":
                return {"truths": [f"truth {mark}"]}
            if schema == "Claims":
                n = max(_tags(user))
                return {"claims": [f"claim {n}.{i} {mark}" for i in range(len(v[n]))]}
            if schema == "Verdicts":
                n = int(re.findall(r"claim (\d+)\.\d+", user)[0])
                return {"verdicts": [{"verdict": _DE_CLAIM[x], "reason": "scripted"} for x in v[n]]}
        return super()._deepeval(case, schema, user, mark)


def _last(labels: list[str]) -> int:
    return max(int(x.split(".")[0]) for x in labels)


def rag_conversation(mark: str, roles: str, contexts: dict[int, int], *, expected: str | None = "the expected outcome",
                     cid: str = "c") -> Conversation:
    """A conversation of ``roles`` whose assistant turn N retrieved ``contexts[N]`` chunks, labelled
    ``[cN.k]``."""
    from ragmeter.core.schema import Chunk

    turns = []
    for i, r in enumerate(roles, 1):
        ctx = [Chunk(text=f"document [c{i}.{k}] {mark}") for k in range(1, contexts[i] + 1)] if i in contexts else None
        turns.append(Turn(role="user" if r == "u" else "assistant", content=f"message {i} [t{i}] {mark}", contexts=ctx))
    return Conversation(id=cid, turns=turns, expected_outcome=expected and f"{expected} {mark}")


def conversation(mark: str, roles: str, *, role: str | None = "a polite travel assistant", cid: str = "c",
                 calls: dict[int, int] | None = None) -> Conversation:
    """A conversation of ``roles`` (``u``/``a`` per turn), every turn tagged with the marker and its
    position; assistant turn N calls ``calls[N]`` tools."""
    from ragmeter.core.schema import ToolCall

    turns = [Turn(role="user" if r == "u" else "assistant", content=f"message {i} [t{i}] {mark}",
                  tool_calls=[ToolCall(name=f"tool{k}", arguments={"q": f"x{k}"}) for k in range((calls or {}).get(i, 0))])
             for i, r in enumerate(roles, 1)]
    return Conversation(id=cid, turns=turns, chatbot_role=role and f"{role} {mark}")


def ours(srv: ParityServer, entry: Any, convs: list[Conversation]) -> list[Any]:
    """ragmeter's scores of ``entry`` on the conversations (one run: prepare, flush, score)."""
    req = resolve(entry)
    samples = [to_samples(c)[0] for c in convs]
    opts = {"judge": "openai:gpt-4o-mini", "judge_base_url": srv.url, "judge_api_key_env": "PARITY_KEY",
            "judge_backoff_base": 0.01, "judge_backoff_max": 0.02, "judge_parse_retries": 0}
    ctx = ScoringContext(opts)
    try:
        req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        return req.spec.fn(samples, ctx, **req.params)
    finally:
        ctx.close()


def deepeval_model(srv: ParityServer) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from deepeval.models import OpenAIModel

        return OpenAIModel(model="gpt-4o-mini", base_url=srv.url, api_key="parity")


def theirs(metric: Any, conv: Conversation) -> tuple[float | None, bool | None]:
    """DeepEval's score and success of ``conv``, ``(None, None)`` for a refused test case."""
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.test_case import ConversationalTestCase
    from deepeval.test_case import ToolCall as DeCall
    from deepeval.test_case import Turn as DeTurn

    tc = ConversationalTestCase(turns=[DeTurn(role=t.role, content=t.content,
                                              retrieval_context=None if t.contexts is None else [c.text for c in t.contexts],
                                              tools_called=[DeCall(name=c.name, input_parameters=c.arguments)
                                                            for c in t.tool_calls] or None)
                                       for t in conv.turns],
                                chatbot_role=conv.chatbot_role, scenario=conv.scenario,
                                expected_outcome=conv.expected_outcome)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = metric.measure(tc, _show_indicator=False)
    except MissingTestCaseParamsError:
        return None, None
    return float(value), metric.success
