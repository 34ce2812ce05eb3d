"""A LangGraph ReAct agent (langgraph.prebuilt.create_react_agent over langchain-openai's
ChatOpenAI) with one tool, traced by openinference-instrumentation-langchain."""

from __future__ import annotations

from _export import arguments, tracer_provider

QUESTION = "What is the weather in Paris?"


def main() -> None:
    args = arguments()
    provider = tracer_provider(args, "langgraph-react")
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider)
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21C" if city == "Paris" else "unknown city"

    model = ChatOpenAI(model="gpt-4o-mini", base_url=args.base_url, api_key="not-a-key")
    agent = create_react_agent(model, [get_weather])
    result = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    print(result["messages"][-1].content)
    provider.shutdown()


if __name__ == "__main__":
    main()
