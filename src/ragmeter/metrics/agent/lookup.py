"""Where a value comes from: ``metadata.company``, ``intent.entity``, ``final_output.decision``,
``trace.<field>`` or a sample field (``question``, ``answer`` ...), read from a sample."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Sample

_SOURCE_ROOTS = ("metadata", "intent", "final_output", "trace")
_SAMPLE_FIELDS = ("question", "answer", "reference", "id")


def _check_source(src: Any, where: str) -> str:
    if not isinstance(src, str) or not src:
        raise ConfigError(f"{where}: a source must be a text like 'metadata.company', got {src!r}")
    root = src.split(".", 1)[0]
    if src in _SAMPLE_FIELDS or (root in _SOURCE_ROOTS and "." in src):
        return src
    raise ConfigError(f"{where}: unknown source {src!r}; use metadata.KEY, intent.KEY, "
                      f"final_output.KEY, trace.KEY, question, answer or reference")


def _get_path(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if isinstance(cur, Mapping):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
        if cur is None:
            return None
    return cur


def lookup(sample: Sample, source: str) -> Any:
    """The value a source names for a sample (``None`` when absent).

    Sources: ``metadata.KEY``, ``intent.KEY``, ``final_output.KEY``, ``trace.FIELD`` (dotted
    paths go deeper), ``question``, ``answer``, ``reference``, ``id``.
    """
    if source in _SAMPLE_FIELDS:
        return getattr(sample, source)
    root, _, rest = source.partition(".")
    trace = sample.trace
    if root == "metadata":
        return _get_path(sample.metadata, rest)
    if trace is None:
        return None
    if root == "intent":
        return _get_path(trace.intent or {}, rest)
    if root == "final_output":
        return _get_path(trace.final_output or {}, rest)
    if root == "trace":
        return _get_path(trace.model_dump(mode="json"), rest)
    return None
