"""An OpenAI Agents SDK agent with one tool. Its spans are written twice: by the SDK's own tracing
(a processor that writes each trace's and span's ``export()`` JSON, one per line: the SDK's
trace export) with ``--sdk-export FILE``, and, with ``--spans`` / ``--otlp``, through
openinference-instrumentation-openai-agents to the OpenTelemetry exporters when it is installed."""

from __future__ import annotations

import json
import sys

from _export import arguments, tracer_provider

QUESTION = "What is the weather in Paris?"


def main() -> None:
    sdk_export = None
    if "--sdk-export" in sys.argv:
        i = sys.argv.index("--sdk-export")
        sdk_export = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    args = arguments()
    from openai import AsyncOpenAI

    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        TracingProcessor,
        function_tool,
        set_trace_processors,
    )

    class ExportFile(TracingProcessor):
        """The SDK's trace export: each trace and span as its ``export()`` object, one per line."""

        def __init__(self, path: str) -> None:
            self.fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed at shutdown

        def on_trace_start(self, trace) -> None:  # noqa: ANN001
            pass

        def on_trace_end(self, trace) -> None:  # noqa: ANN001
            if (data := trace.export()) is not None:
                self.fh.write(json.dumps(data, default=str) + "\n")

        def on_span_start(self, span) -> None:  # noqa: ANN001
            pass

        def on_span_end(self, span) -> None:  # noqa: ANN001
            if (data := span.export()) is not None:
                self.fh.write(json.dumps(data, default=str) + "\n")

        def shutdown(self) -> None:
            self.fh.close()

        def force_flush(self) -> None:
            self.fh.flush()

    processors = [ExportFile(sdk_export)] if sdk_export else []
    set_trace_processors(processors)  # replaces the exporter to OpenAI's servers
    if args.spans or args.otlp:
        provider = tracer_provider(args, "openai-agents")
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21C" if city == "Paris" else "unknown city"

    client = AsyncOpenAI(base_url=args.base_url, api_key="not-a-key")
    agent = Agent(name="weather_agent", instructions="Answer with the weather.", tools=[get_weather],
                  model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client))
    result = Runner.run_sync(agent, QUESTION)
    print(result.final_output)
    for p in processors:
        p.shutdown()
    if args.spans or args.otlp:
        provider.shutdown()


if __name__ == "__main__":
    main()
