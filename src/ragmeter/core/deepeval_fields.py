"""DeepEval's test-case fields read from a ragmeter sample: where each ``LLMTestCase`` field
(``SingleTurnParams``) lands when ``io.readers`` reads a DeepEval-shaped row, and its value back.

``input`` -> ``question``, ``actual_output`` -> ``answer``, ``expected_output`` -> the first
reference, ``context`` -> ``relevant`` (its texts), ``retrieval_context`` -> ``contexts`` (their
texts), ``tools_called`` -> the trace's tool calls, ``expected_tools``, ``tags``, ``mcp_*`` ->
``metadata`` under their own names, ``metadata`` -> the rest of ``metadata``. Metrics that name
DeepEval's fields (G-Eval's and a DAG's ``evaluation_params``) read them here; the conversational
fields (``ConversationalTestCase``) are added beside these.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ragmeter.core.schema import Sample

#: metadata keys that hold DeepEval fields of their own (not part of DeepEval's ``metadata``)
_OWN = ("tags", "expected_tools", "tools_called", "mcp_servers", "mcp_tools_called", "mcp_resources_called",
        "mcp_prompts_called")


def _tools_called(s: Sample) -> Any:
    if s.trace is not None and s.trace.tool_calls:
        return [{"name": c.name, "input_parameters": c.arguments, "output": c.result} for c in s.trace.tool_calls]
    return s.metadata.get("tools_called")


#: DeepEval's ``LLMTestCase`` field -> its value in a sample (``None``: the field is not set)
LLM_TEST_CASE: dict[str, Callable[[Sample], Any]] = {
    "input": lambda s: s.question,
    "actual_output": lambda s: s.answer,
    "expected_output": lambda s: s.reference,
    "context": lambda s: None if s.relevant is None else [c.text or "" for c in s.relevant],
    "retrieval_context": lambda s: None if s.contexts is None else s.context_texts,
    "metadata": lambda s: {k: v for k, v in s.metadata.items() if k not in _OWN} or None,
    "tags": lambda s: s.metadata.get("tags"),
    "tools_called": _tools_called,
    "expected_tools": lambda s: s.metadata.get("expected_tools"),
    **{k: (lambda s, k=k: s.metadata.get(k)) for k in _OWN[3:]},
}


def field_value(sample: Sample, name: str) -> Any:
    """The value of DeepEval's ``LLMTestCase`` field ``name`` in ``sample`` (``None`` if unset)."""
    return LLM_TEST_CASE[name](sample)


def as_text(value: Any) -> str:
    """A field's value as the text a judge reads: texts as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, indent=1)
