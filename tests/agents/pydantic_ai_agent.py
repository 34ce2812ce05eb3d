"""A pydantic-ai agent with one tool; pydantic-ai writes OTel GenAI spans itself."""

from __future__ import annotations

from _export import arguments, tracer_provider

QUESTION = "What is the weather in Paris?"


def main() -> None:
    args = arguments()
    provider = tracer_provider(args, "pydantic-ai")
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=args.base_url, api_key="not-a-key"))
    agent = Agent(model, name="weather_agent",
                  capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=provider, include_content=True))])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21C" if city == "Paris" else "unknown city"

    result = agent.run_sync(QUESTION)
    print(result.output)
    provider.shutdown()


if __name__ == "__main__":
    main()
