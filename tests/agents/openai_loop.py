"""A plain OpenAI SDK tool loop, traced by openinference-instrumentation-openai
(``--instrumentation openinference``) or opentelemetry-instrumentation-openai-v2 (``otel``)."""

from __future__ import annotations

import json
import os

from _export import arguments, tracer_provider

QUESTION = "What is the weather in Paris?"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def get_weather(city: str) -> str:
    return "Sunny, 21C" if city == "Paris" else "unknown city"


def main() -> None:
    args = arguments()
    if args.instrumentation == "otel":
        # message content on the spans (gen_ai.input.messages / gen_ai.output.messages)
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    provider = tracer_provider(args, f"openai-loop-{args.instrumentation}")
    if args.instrumentation == "otel":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    import openai

    client = openai.OpenAI(base_url=args.base_url, api_key="not-a-key")
    tracer = provider.get_tracer("openai-loop")
    with tracer.start_as_current_span("weather_agent"):
        messages = [{"role": "user", "content": QUESTION}]
        for _ in range(5):
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
            msg = reply.choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                print(msg.content)
                break
            for tc in msg.tool_calls:
                result = get_weather(**json.loads(tc.function.arguments))
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
    provider.shutdown()


if __name__ == "__main__":
    main()
