"""The fields of ragas' ``SingleTurnSample`` / ``MultiTurnSample`` that have no column of their own in
ragmeter's schema: read from a row by name and kept in the sample's (or the conversation's)
``metadata``, where ragas' metrics under ragas' names (``ragas:*``) find them.

ragas' other fields map to the schema (io/readers.py ``FIELD_ALIASES``): ``user_input`` is the
question (a list of messages: a conversation), ``response`` the answer, ``reference`` the reference,
``retrieved_contexts`` the contexts, ``reference_contexts`` the relevant chunks (the SQL schema of
``ragas:sql_semantic_equivalence``, the text of ``ragas:summary_score``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ragas fields kept in metadata: per-sample rubrics (``InstanceSpecificRubrics``), the expected tool
#: calls (``ToolCallAccuracy``, ``ToolCallF1``), the allowed topics (``TopicAdherence``)
RAGAS_METADATA = ("rubrics", "reference_tool_calls", "reference_topics")


def reference_tool_calls(value: Any, err: Callable[[str, str], Exception]) -> list[dict[str, Any]]:
    """ragas' ``reference_tool_calls``: a list of ``{"name": str, "args": {...}}`` (``arguments`` is
    accepted for ``args``), returned as ``{"name", "args"}`` dicts.

    Raises:
        the error ``err(field, message)`` builds (naming the file, line and field).
    """
    if not isinstance(value, list):
        raise err("reference_tool_calls", f"expected a list of {{name, args}} tool calls, got {type(value).__name__}")
    out = []
    for i, c in enumerate(value):
        where = f"reference_tool_calls[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise err(where, "expected a tool call {\"name\": ..., \"args\": {...}} with a non-empty name")
        args = c.get("args", c.get("arguments")) or {}
        if not isinstance(args, dict):
            raise err(f"{where}.args", f"expected an object of arguments, got {type(args).__name__}")
        out.append({"name": c["name"], "args": args})
    return out
