"""Chat messages as the instrumentations record them, made into one shape: OpenAI chat messages
(``role``, ``content``, ``tool_calls`` of ``{"id", "type": "function", "function": {"name",
"arguments"}}``, ``tool_call_id``), which :func:`ragmeter.io.traces.parse_trace` reads.

Sources: the OTel GenAI ``gen_ai.input.messages`` / ``gen_ai.output.messages`` JSON (``parts`` of
``text``, ``tool_call``, ``tool_call_response``), the older indexed ``gen_ai.prompt.N.*`` /
``gen_ai.completion.N.*`` attributes, OpenInference ``llm.input_messages.N.message.*``, and
flattened or nested dicts of any of these.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.io.traces import lc_message  # noqa: F401 - LangChain's serialized messages, read here too


def loads_maybe(value: Any) -> Any:
    """``value`` parsed as JSON when it is JSON text of a list or object, else unchanged."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        from ragmeter.core.safejson import JSONInputError, loads

        try:
            return loads(value)
        except JSONInputError as exc:
            if exc.syntax:
                return value
            raise DatasetError(f"JSON value {exc}") from None
    return value


def arguments_of(value: Any) -> dict[str, Any] | None:
    """Tool-call arguments as a dict: a mapping, JSON text of an object, or a Python dict literal (how
    LangChain writes a structured tool's input); ``None`` when the value is none of these."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        s = value.strip()
        if s[:1] != "{":
            return None
        obj = loads_maybe(s)
        if isinstance(obj, Mapping):
            return dict(obj)
        try:  # "{'city': 'Paris'}": str() of a dict
            obj = ast.literal_eval(s)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        return dict(obj) if isinstance(obj, dict) else None
    return None


def unflatten(attrs: Mapping[str, Any], prefix: str) -> list[Any]:
    """``prefix.0.a.b = 1, prefix.1.a = 2`` -> ``[{"a": {"b": 1}}, {"a": 2}]``: indexed attributes as
    the list they flatten (numeric keys become lists, in index order)."""
    root: dict[str, Any] = {}
    dotted = prefix + "."
    for k, v in attrs.items():
        if not k.startswith(dotted):
            continue
        node = root
        parts = k[len(dotted):].split(".")
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = node[p] = {}
            node = nxt
        node[parts[-1]] = v
    return _listify(root) if root else []


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_listify(node[k]) for k in sorted(node, key=int)]
    return {k: _listify(v) for k, v in node.items()}


def _text_of(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, Mapping):
                t = p.get("text", p.get("content"))
                if isinstance(t, Mapping):  # OpenInference contents.N.message_content.text
                    t = t.get("text")
                if isinstance(t, str) and p.get("type", "text") in ("text", "output_text", "input_text"):
                    parts.append(t)
                elif isinstance(p.get("message_content"), Mapping):
                    mc = p["message_content"]
                    if isinstance(mc.get("text"), str):
                        parts.append(mc["text"])
        return "".join(parts) if parts else None
    if isinstance(content, Mapping):
        return _text_of([content])
    return str(content)


def _call(id_: Any, name: Any, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, default=str)
    return {"id": None if id_ is None else str(id_), "type": "function",
            "function": {"name": str(name or ""), "arguments": arguments}}


def _role(value: Any) -> str:
    role = str(value or "").lower()
    return {"human": "user", "ai": "assistant", "model": "assistant", "system": "system",
            "developer": "system", "function": "tool"}.get(role, role)


def genai_message(m: Any) -> dict[str, Any] | None:
    """One message of ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (``role`` and
    ``parts``), of the indexed ``gen_ai.prompt.N`` attributes, or already in OpenAI's shape."""
    if not isinstance(m, Mapping):
        return None
    out: dict[str, Any] = {"role": _role(m.get("role") or ("assistant" if "finish_reason" in m else ""))}
    calls: list[dict[str, Any]] = []
    texts: list[str] = []
    parts = m.get("parts")
    if isinstance(parts, list):
        for p in parts:
            if not isinstance(p, Mapping):
                continue
            kind = p.get("type")
            if kind == "text" and isinstance(p.get("content"), str):
                texts.append(p["content"])
            elif kind == "tool_call":
                calls.append(_call(p.get("id"), p.get("name"), p.get("arguments")))
            elif kind == "tool_call_response":
                out["role"] = "tool"
                out["tool_call_id"] = None if p.get("id") is None else str(p["id"])
                resp = p.get("response", p.get("result"))
                texts.append(resp if isinstance(resp, str) else json.dumps(resp, default=str))
    content = m.get("content")
    if isinstance(content, str | list) and not texts:
        t = _text_of(content)
        if t is not None:
            texts.append(t)
    if isinstance(m.get("message"), Mapping):  # gen_ai.choice events: {"index", "message": {...}}
        inner = genai_message({"role": "assistant", **m["message"]})
        return inner
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, Mapping):
            fn = tc.get("function") if isinstance(tc.get("function"), Mapping) else tc
            tcall = tc.get("tool_call") if isinstance(tc.get("tool_call"), Mapping) else None
            if tcall is not None:  # OpenInference tool_calls.N.tool_call.{id, function.{name, arguments}}
                fn = tcall.get("function") if isinstance(tcall.get("function"), Mapping) else {}
                calls.append(_call(tcall.get("id"), fn.get("name"), fn.get("arguments")))
            else:
                calls.append(_call(tc.get("id"), fn.get("name"), fn.get("arguments", fn.get("args"))))
    if m.get("tool_call_id") is not None:
        out["tool_call_id"] = str(m["tool_call_id"])
        if out["role"] not in ("tool",):
            out["role"] = "tool"
    if m.get("id") is not None and out["role"] == "tool" and "tool_call_id" not in out:
        out["tool_call_id"] = str(m["id"])
    out["content"] = "\n".join(texts) if texts else None
    if calls:
        out["tool_calls"] = calls
    if m.get("name") is not None and out["role"] == "tool":
        out["name"] = str(m["name"])
    return out if out["role"] else None


def messages_from(value: Any) -> list[dict[str, Any]]:
    """A list of messages from JSON text, a list, or an object holding ``messages``."""
    value = loads_maybe(value)
    if isinstance(value, Mapping):
        for key in ("messages", "input", "prompt"):
            if isinstance(value.get(key), list):
                value = value[key]
                break
        else:
            return []
    if not isinstance(value, list):
        return []
    out = []
    for m in value:
        msg = genai_message(loads_maybe(m))
        if msg is not None:
            out.append(msg)
    return out


def openinference_messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``llm.input_messages.N.message.*`` (flattened) or ``llm.input_messages`` (a nested list, as
    Phoenix's dataframe keeps it) as chat messages."""
    items = attrs.get(prefix)
    if not isinstance(items, list):
        items = unflatten(attrs, prefix)
    out = []
    for it in items:
        it = loads_maybe(it)
        m = it.get("message", it) if isinstance(it, Mapping) else None
        if not isinstance(m, Mapping):
            continue
        m = dict(m)
        if m.get("content") is None and isinstance(m.get("contents"), list):
            m["content"] = _text_of(m["contents"])
        msg = genai_message(m)
        if msg is not None:
            out.append(msg)
    return out


def output_messages(value: Any) -> list[dict[str, Any]]:
    """What an LLM call returned, as messages: an OpenAI completion (``choices``), a LangChain
    ``generations`` result, a message or list of messages, or plain text (an assistant message)."""
    value = loads_maybe(value)
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    if isinstance(value, Mapping):
        if isinstance(value.get("choices"), list):
            return [m for m in (genai_message({"role": "assistant", **c["message"]}) for c in value["choices"]
                                if isinstance(c, Mapping) and isinstance(c.get("message"), Mapping)) if m]
        gens = value.get("generations")
        if isinstance(gens, list):
            flat = [g for row in gens for g in (row if isinstance(row, list) else [row]) if isinstance(g, Mapping)]
            out = []
            for g in flat:
                msg = lc_message(g.get("message")) if g.get("message") is not None else None
                m = genai_message({"role": "assistant", **msg}) if isinstance(msg, Mapping) else \
                    {"role": "assistant", "content": g.get("text")}
                if m:
                    out.append(m)
            return out
        if isinstance(value.get("messages"), list):
            return messages_from(value)
        m = genai_message({"role": "assistant", **lc_message(value)}) if ("content" in value or "tool_calls" in value
                                                                          or "kwargs" in value) else None
        return [m] if m else []
    if isinstance(value, list):
        return messages_from([lc_message(x) for x in value])
    return []


def input_messages(value: Any) -> list[dict[str, Any]]:
    """What an LLM call was sent, as messages: a list of messages (LangChain's list of lists too),
    ``{"messages": [...]}``, ``{"prompts": [...]}`` or plain text (a user message)."""
    value = loads_maybe(value)
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, Mapping):
        if isinstance(value.get("prompts"), list):
            return [{"role": "user", "content": str(p)} for p in value["prompts"]]
        value = value.get("messages", value.get("input"))
        value = loads_maybe(value)
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
    if isinstance(value, list):
        if value and all(isinstance(x, list) for x in value):  # LangChain: one list per prompt
            value = value[0]
        return messages_from([lc_message(x) for x in value])
    return []
