"""Reading agent traces: ragmeter's JSONL trace objects, OpenAI chat-completions message logs
(with ``tool_calls``) and Anthropic ``tool_use`` / ``tool_result`` blocks, into :class:`AgentTrace`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ragmeter.core.schema import AgentTrace

#: canonical AgentTrace field -> accepted keys of a JSONL trace object (first present wins).
TRACE_ALIASES: dict[str, tuple[str, ...]] = {
    "intent": ("intent", "parsed_intent"),
    "plan": ("plan", "task_plan"),
    "tool_calls": ("tool_calls", "tools_used", "tools"),
    "trajectory": ("trajectory", "executed_nodes", "steps"),
    "final_output": ("final_output", "final_answer", "assessment", "output"),
    "step_count": ("step_count", "n_steps"),
    "latency_ms": ("latency_ms", "total_latency_ms"),
    "input_text": ("input_text",),
    "final_text": ("final_text",),
}
_ALL_TRACE_KEYS = {k for names in TRACE_ALIASES.values() for k in names} | {"messages"}
_PLAN_ITEM_KEYS = ("action", "step", "description", "name", "task", "agent")
_STEP_ITEM_KEYS = ("name", "node", "step")
_ROLES = {"human": "user", "ai": "assistant", "model": "assistant"}


def parse_trace(value: Any) -> AgentTrace:
    """Read an agent trace from any of the supported shapes.

    Accepted:

    - an :class:`~ragmeter.core.schema.AgentTrace` (returned as is);
    - our JSONL object: ``intent`` (``entity``, ``type``, ``confidence``), ``plan`` (strings, or
      objects with ``action``/``step``/``description``), ``tool_calls`` (objects with ``name``,
      ``arguments``, ``result``, ``latency_ms``, ``error``; or plain tool names; or OpenAI
      ``{"function": {"name", "arguments"}}`` items), ``trajectory`` (step names),
      ``final_output`` (an object; a JSON string is parsed), ``step_count``, ``latency_ms``;
      a few aliases are accepted (:data:`TRACE_ALIASES`);
    - an OpenAI chat-completions message list — assistant ``tool_calls`` (and the legacy
      ``function_call``), ``tool`` / ``function`` result messages matched by ``tool_call_id``;
      Anthropic-style ``tool_use`` / ``tool_result`` content blocks are read too — or an object
      with such a list under ``messages`` (its other keys are read as above and win);
    - a JSON string of any of these.

    From a message list: ``tool_calls`` in order, each with the ``turn`` (index of the assistant
    message) that issued it; ``step_count`` = number of assistant messages; ``input_text`` = the
    first user message; ``final_text`` = the last assistant message when it calls no tool;
    ``final_output`` = that text parsed as a JSON object, when it is one (a fenced ```json block
    is accepted). Tool arguments that are not valid JSON are kept in ``arguments_raw`` (the call
    then matches no expected arguments except under ``tool_args="ignore"``).

    A tool call has an ``error`` when its result says it failed: an Anthropic ``tool_result`` with
    ``is_error: true``, a LangChain ``ToolMessage`` with ``status: "error"``, a result that is a JSON
    object with a non-empty ``error`` member (``{"error": "..."}``, as OpenAI tool-call logs record
    failures), or an explicit ``error`` / ``is_error`` on one of our ``tool_calls`` items.

    Raises:
        ValueError, TypeError: the value has none of these shapes (the dataset reader turns this
            into a ``DatasetError`` naming the file, line and field).

    Example:
        >>> t = parse_trace([{"role": "user", "content": "Weather in SF?"},
        ...                  {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        ...                   "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"SF\\"}"}}]},
        ...                  {"role": "tool", "tool_call_id": "c1", "content": "80F, sunny"},
        ...                  {"role": "assistant", "content": "It is 80F and sunny."}])
        >>> [(c.name, c.arguments, c.result) for c in t.tool_calls], t.final_text
        ([('get_weather', {'city': 'SF'}, '80F, sunny')], 'It is 80F and sunny.')
    """
    if isinstance(value, AgentTrace):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit number, deep nesting
            raise ValueError(f"a trace given as text must be JSON ({getattr(exc, 'msg', type(exc).__name__)})") from None
    if isinstance(value, list):
        fields = _from_messages(value)
    elif isinstance(value, Mapping):
        fields = _from_messages(value["messages"]) if value.get("messages") is not None else {}
        fields.update(_from_object(value))
    else:
        raise TypeError(f"expected a trace object or a list of chat messages, got {type(value).__name__}")
    try:
        return AgentTrace.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _first(d: Mapping[str, Any], names: Sequence[str]) -> tuple[str | None, Any]:
    for n in names:
        if n in d and d[n] is not None:
            return n, d[n]
    return None, None


def _from_object(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for canon, names in TRACE_ALIASES.items():
        key, v = _first(d, names)
        if key is None:
            continue
        if canon == "intent":
            if not isinstance(v, Mapping):
                raise ValueError(f"'{key}' must be an object (entity, type, confidence), got {type(v).__name__}")
            out["intent"] = dict(v)
        elif canon == "plan":
            out["plan"] = [_item_text(x, _PLAN_ITEM_KEYS, key, i) for i, x in enumerate(_as_list(v, key))]
        elif canon == "tool_calls":
            out["tool_calls"] = [_tool_call(x, i) for i, x in enumerate(_as_list(v, key))]
        elif canon == "trajectory":
            out["trajectory"] = [_item_text(x, _STEP_ITEM_KEYS, key, i) for i, x in enumerate(_as_list(v, key))]
        elif canon == "final_output":
            if isinstance(v, str):
                obj = _json_object(v)
                if obj is not None:
                    out["final_output"] = obj
                else:
                    out.setdefault("final_text", v)
            elif isinstance(v, Mapping):
                out["final_output"] = dict(v)
            else:
                raise ValueError(f"'{key}' must be an object or JSON text, got {type(v).__name__}")
        else:
            out[canon] = v
    for k, v in d.items():  # anything else is kept on the trace (AgentTrace allows extras)
        if k not in _ALL_TRACE_KEYS:
            out[k] = v
    return out


def _as_list(v: Any, key: str) -> list[Any]:
    if not isinstance(v, list | tuple):
        raise ValueError(f"'{key}' must be a list, got {type(v).__name__}")
    return list(v)


def _item_text(x: Any, keys: Sequence[str], where: str, i: int) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        _, v = _first(x, keys)
        if isinstance(v, str):
            return v
        raise ValueError(f"'{where}' item {i} has none of the keys {list(keys)}")
    if isinstance(x, int | float) and not isinstance(x, bool):
        return str(x)
    raise ValueError(f"'{where}' item {i} should be text or an object, got {type(x).__name__}")


def _parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool arguments as a dict, plus the raw text when it is not a JSON object."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if isinstance(raw, str):
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            return {}, raw
        return (dict(obj), None) if isinstance(obj, dict) else ({}, raw)
    return {}, json.dumps(raw, default=str)


def _tool_call(item: Any, i: int, turn: int | None = None) -> dict[str, Any]:
    if isinstance(item, str):
        return {"name": item, "turn": turn}
    if not isinstance(item, Mapping):
        raise ValueError(f"tool call {i} should be an object or a tool name, got {type(item).__name__}")
    if isinstance(item.get("function"), Mapping):  # OpenAI {"id", "type": "function", "function": {...}}
        fn = item["function"]
        out: dict[str, Any] = {"name": fn.get("name"), "id": item.get("id")}
        args = fn.get("arguments")
    elif item.get("type") == "tool_use":  # Anthropic content block
        out = {"name": item.get("name"), "id": item.get("id")}
        args = item.get("input")
    else:
        _, name = _first(item, ("name", "tool", "tool_name"))
        _, args = _first(item, ("arguments", "args", "input", "parameters"))
        _, result = _first(item, ("result", "output", "response"))
        error = item.get("error")
        if error is None or error is True:
            error = _error_of(result, item.get("is_error") if error is None else True, item.get("status"))
        out = {"name": name, "id": item.get("id"), "result": result,
               "latency_ms": item.get("latency_ms"), "error": error or None,
               "turn": item.get("turn")}
    if not isinstance(out.get("name"), str) or not out["name"]:
        raise ValueError(f"tool call {i} has no name")
    out["arguments"], raw = _parse_arguments(args)
    if raw is not None:
        out["arguments_raw"] = raw
    if turn is not None:
        out["turn"] = turn
    if out.get("error") is not None and not isinstance(out["error"], str):
        out["error"] = json.dumps(out["error"], default=str)
    return {k: v for k, v in out.items() if v is not None}


def _text(content: Any) -> str | None:
    """The text of a message's content (a string or a list of content parts)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content
                 if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type", "text") == "text")]
        parts = [p for p in parts if isinstance(p, str)]
        return "".join(parts) if parts else None
    return str(content)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def _json_object(text: str) -> dict[str, Any] | None:
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _result_value(content: Any) -> Any:
    text = _text(content) if isinstance(content, list) else content
    if isinstance(text, str) and text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return text
    return text


def _error_of(result: Any, flag: Any = None, status: Any = None) -> str | None:
    """The error a tool result reports, or ``None``.

    Counted as an error: a truthy ``is_error`` flag (Anthropic ``tool_result``), ``status: "error"``
    (LangChain ``ToolMessage``), an error string given directly, or a result that is a JSON object
    with a non-empty ``error`` member (the ``{"error": "..."}`` convention of OpenAI tool-call
    logs). A number or ``null`` under ``error`` is data, not a failure.
    """
    if isinstance(flag, str) and flag.strip() and flag.strip().lower() not in ("false", "0"):
        return flag if flag.strip().lower() not in ("true", "1") else (_result_text(result) or "error")
    if flag is True or (isinstance(status, str) and status.lower() == "error"):
        return _result_text(result) or "error"
    if isinstance(result, Mapping):
        err = result.get("error")
        if isinstance(err, str) and err.strip():
            return err
        if isinstance(err, Mapping) and err:
            msg = err.get("message")
            return msg if isinstance(msg, str) and msg.strip() else json.dumps(err, default=str)
    return None


def _result_text(result: Any) -> str | None:
    if result is None or isinstance(result, str):
        return result or None
    if isinstance(result, list):
        return _text(result)
    return json.dumps(result, default=str)


#: LangChain message classes and ``type`` values -> chat roles
LC_ROLES = {"HumanMessage": "user", "AIMessage": "assistant", "ToolMessage": "tool", "SystemMessage": "system",
             "FunctionMessage": "tool", "ChatMessage": None, "AIMessageChunk": "assistant",
             "human": "user", "ai": "assistant", "tool": "tool", "system": "system", "function": "tool"}


def lc_message(m: Any) -> Any:
    """A LangChain message as LangSmith and the serializers write it (``{"lc": 1, "id": [...,
    "AIMessage"], "kwargs": {...}}``, or ``{"type": "ai", "data": {...}}``) as a plain message dict;
    anything else unchanged."""
    if not isinstance(m, Mapping):
        return m
    if isinstance(m.get("kwargs"), Mapping) and isinstance(m.get("id"), list) and m["id"]:
        body = dict(m["kwargs"])
        role = LC_ROLES.get(str(m["id"][-1])) or body.get("role") or body.get("type")
    elif isinstance(m.get("data"), Mapping) and isinstance(m.get("type"), str):
        body = dict(m["data"])
        role = LC_ROLES.get(m["type"]) or body.get("role")
    else:
        return m
    body["role"] = role
    if body.get("status") == "error" and role == "tool":
        body["is_error"] = True
    return body


def _from_messages(msgs: Any) -> dict[str, Any]:
    if not isinstance(msgs, list):
        raise ValueError(f"'messages' must be a list of chat messages, got {type(msgs).__name__}")
    calls: list[dict[str, Any]] = []
    answered: set[int] = set()
    input_text: str | None = None
    final_text: str | None = None
    turn = -1

    def attach(call_id: Any, content: Any, *, name: Any = None, error: Any = None, status: Any = None,
               latency: Any = None) -> None:
        idx = next((j for j, c in enumerate(calls) if call_id and c.get("id") == call_id), None)
        if idx is None:  # no usable id: the earliest unanswered call (of that name, if given)
            idx = next((j for j, c in enumerate(calls)
                        if j not in answered and (name is None or c["name"] == name)), None)
        if idx is None:
            return
        answered.add(idx)
        calls[idx]["result"] = _result_value(content)
        err = _error_of(calls[idx]["result"], error, status)
        if err is not None:
            calls[idx]["error"] = err
        if isinstance(latency, int | float) and not isinstance(latency, bool):
            calls[idx]["latency_ms"] = float(latency)

    for i, m in enumerate(msgs):
        if not isinstance(m, Mapping):
            raise ValueError(f"message {i} should be an object, got {type(m).__name__}")
        m = lc_message(m)  # LangChain's messages_to_dict / dumpd forms
        role = m.get("role") or m.get("type")
        if not isinstance(role, str):
            raise ValueError(f"message {i} has no role (expected chat messages with 'role': user, "
                             "assistant, tool ...)")
        role = _ROLES.get(role, role)
        content = m.get("content")
        if role == "user":
            blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"] \
                if isinstance(content, list) else []
            for b in blocks:
                attach(b.get("tool_use_id"), b.get("content"), error=b.get("is_error"))
            text = _text(content)
            if input_text is None and text:
                input_text = text
        elif role == "assistant":
            turn += 1
            new = [_tool_call(tc, len(calls) + j, turn) for j, tc in enumerate(m.get("tool_calls") or [])]
            if isinstance(m.get("function_call"), Mapping):
                new.append(_tool_call({"function": m["function_call"]}, len(calls) + len(new), turn))
            if isinstance(content, list):
                new.extend(_tool_call(b, len(calls) + len(new), turn) for b in content
                           if isinstance(b, Mapping) and b.get("type") == "tool_use")
            calls.extend(new)
            final_text = None if new else _text(content)
        elif role in ("tool", "function"):
            attach(m.get("tool_call_id"), content, name=m.get("name") if role == "function" else None,
                   error=m.get("error") or m.get("is_error"), status=m.get("status"), latency=m.get("latency_ms"))
    out: dict[str, Any] = {"tool_calls": calls, "step_count": turn + 1}
    if input_text is not None:
        out["input_text"] = input_text
    if final_text is not None:
        out["final_text"] = final_text
        obj = _json_object(final_text)
        if obj is not None:
            out["final_output"] = obj
    return out
