"""Where the agent scripts' spans go: the OpenTelemetry SDK's real exporters.

``--spans FILE``: every span, encoded by the OTLP exporter's own encoder into one
``ExportTraceServiceRequest``, written at exit as OTLP/JSON (``.json``, what the Collector's file
exporter writes) or protobuf (``.pb``). ``--otlp URL``: OTLP/HTTP (protobuf) to ``URL/v1/traces``,
e.g. ``ragmeter serve``. Runs in the agents' own environment (``.venv-agents``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class OTLPFileExporter(SpanExporter):
    """Keeps the finished spans; writes them as one OTLP request when the provider shuts down."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        request = encode_spans(self.spans)
        if self.path.endswith(".pb"):
            with open(self.path, "wb") as fh:
                fh.write(request.SerializeToString())
            return
        from google.protobuf.json_format import MessageToDict

        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(MessageToDict(request), fh)


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True, help="the scripted OpenAI-compatible server")
    ap.add_argument("--spans", help="write the spans to this file (.json or .pb)")
    ap.add_argument("--otlp", help="send the spans over OTLP/HTTP to this server")
    ap.add_argument("--otlp-token", help="the bearer token of that server (RAGMETER_INGEST_TOKEN)")
    ap.add_argument("--instrumentation", default="openinference", help="openinference or otel")
    return ap.parse_args()


def tracer_provider(args: argparse.Namespace, service: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if args.spans:
        provider.add_span_processor(SimpleSpanProcessor(OTLPFileExporter(args.spans)))
    if args.otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        headers = {"Authorization": f"Bearer {args.otlp_token}"} if args.otlp_token else None
        exporter = OTLPSpanExporter(endpoint=args.otlp.rstrip("/") + "/v1/traces", headers=headers)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider
