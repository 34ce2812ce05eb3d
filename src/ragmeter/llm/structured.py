"""Structured verdicts: JSON schemas for providers, and strict parsing of replies into pydantic models."""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError


class ReplyParseError(ValueError):
    """A judge reply is not the JSON object the schema asks for."""


@lru_cache(maxsize=256)
def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in the strict form structured-output APIs accept.

    ``$ref`` are inlined (several local servers do not resolve them), every object lists all its
    properties as required and forbids others, and titles/defaults are dropped, except the
    top-level title that names the schema.
    """
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                return walk(copy.deepcopy(defs[name]))
            out = {k: walk(v) for k, v in node.items() if k not in {"title", "default"}}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    schema = walk(raw)
    schema["title"] = model.__name__
    return schema


@lru_cache(maxsize=256)
def schema_json(model: type[BaseModel]) -> str:
    return json.dumps(strict_schema(model), sort_keys=True, separators=(",", ":"))


_FENCED = re.compile(r"^```[a-zA-Z]*\s*\n(?P<body>.*?)\n?```\s*$", re.S)


def parse_reply(text: str | None, model: type[BaseModel], data: Any = None) -> BaseModel:
    """Parse a reply into ``model``.

    ``data`` is an already-decoded object (a tool call's arguments); otherwise ``text`` must be one
    JSON object, optionally wrapped in a single Markdown code fence. Anything else (prose around
    the JSON, several objects, an array, missing fields, wrong types, values outside an enum) is
    rejected: a guess at what the judge meant would be a made-up verdict. Keys the schema does
    not declare are ignored (the verdict models say so with ``extra="ignore"``).

    Raises:
        ReplyParseError: with a short description of what was wrong.
    """
    if data is None:
        if text is None or not text.strip():
            raise ReplyParseError("empty reply")
        body = text.strip()
        m = _FENCED.match(body)
        if m:
            body = m.group("body").strip()
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ReplyParseError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ReplyParseError(f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        parts = [f"{'.'.join(str(x) for x in e['loc']) or '<root>'}: {e['msg']}" for e in errs[:3]]
        more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
        raise ReplyParseError("does not match the schema: " + "; ".join(parts) + more) from None


#: finish reasons that mean the model declined to answer: OpenAI ``content_filter``, Anthropic
#: ``refusal``, Gemini ``SAFETY`` / ``PROHIBITED_CONTENT`` / ``BLOCKLIST`` / ``SPII``
_DECLINED = {"content_filter", "refusal", "safety", "prohibited_content", "blocklist", "spii"}
#: how a provider client passes on an OpenAI reply's ``refusal`` field as the reply's text
REFUSAL_PREFIX = "REFUSAL: "


def refusal(text: str | None, finish_reason: str | None) -> str | None:
    """Why a reply that did not parse is a refusal (``None`` when it is not one): the model's
    refusal message, or the finish reason that says it declined."""
    if text and text.startswith(REFUSAL_PREFIX):
        return "the judge refused: " + text[len(REFUSAL_PREFIX):].strip()
    reason = str(finish_reason or "").rsplit(".", 1)[-1].lower()  # Gemini: "FinishReason.SAFETY"
    if reason in _DECLINED:
        return f"the judge declined to answer (finish reason {finish_reason})"
    return None
