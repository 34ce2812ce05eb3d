"""OTLP trace exports decoded strictly into :class:`SpanRecord` objects: the decoder lives in
:mod:`ragmeter.io.spans.otlp` (the agent-trace readers use it too); the monitor's names stay here."""

from __future__ import annotations

from ragmeter.io.spans.otlp import (
    MAX_INT64,
    MAX_NANOS,
    NotOTLPError,
    SpanRecord,
    any_value,
    attributes,
    decode_export,
)

__all__ = ["MAX_INT64", "MAX_NANOS", "NotOTLPError", "SpanRecord", "any_value", "attributes", "decode_export"]
