"""What an agent trace's LLM calls cost when its spans recorded the model and the tokens but no
cost: priced with the judge's price list (:mod:`ragmeter.llm.prices`: genai-prices' list prices,
offline). A cost the instrumentation recorded (``gen_ai.usage.cost``, ``llm.cost.total``, MLflow's
``mlflow.llm.cost``, Langfuse's ``calculatedTotalCost`` ...) is kept as it is.

A priced span carries ``cost_source: "genai-prices"``; a span whose model neither list knows keeps
no cost, and the trace counts it in ``unpriced_llm_calls`` (its ``cost_usd`` is then the cost of
the calls that could be priced).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragmeter.core.schema import AgentTrace, Sample

#: the providers tried, in order, for a span that does not name its provider
_PROVIDERS = ("openai", "anthropic", "google")


def _provider(span: Any) -> tuple[str, ...]:
    named = str(getattr(span, "provider", None) or "").lower()
    named = {"gcp.gemini": "google", "gemini": "google", "vertex_ai": "google", "azure.ai.openai": "azure",
             "az.ai.openai": "azure"}.get(named, named)
    return (named,) if named in (*_PROVIDERS, "azure") else _PROVIDERS


def price_trace(trace: AgentTrace, table: Any = None) -> AgentTrace:
    """``trace`` with a cost on each LLM span that records its model and tokens (in place)."""
    from ragmeter.llm.prices import PriceTable

    table = table or PriceTable.load()
    llms = [s for s in trace.spans if s.kind == "llm"]
    unpriced = 0
    for s in llms:
        if s.cost_usd is not None or s.model is None or (s.input_tokens is None and s.output_tokens is None):
            continue
        price = next((p for prov in _provider(s) if (p := table.get(prov, s.model)) is not None), None)
        if price is None:
            unpriced += 1
            continue
        s.cost_usd = price.cost(s.input_tokens or 0, s.output_tokens or 0)
        s.cost_source = "genai-prices"  # type: ignore[attr-defined]
    costs = [s.cost_usd for s in llms if s.cost_usd is not None]
    if costs:
        trace.cost_usd = sum(costs)  # type: ignore[attr-defined]
    if unpriced:
        trace.unpriced_llm_calls = unpriced  # type: ignore[attr-defined]
    return trace


def price_samples(samples: Iterable[Sample], table: Any = None) -> None:
    """Price the LLM spans of every sample's agent trace (see :func:`price_trace`)."""
    traces = [s.trace for s in samples if s.trace is not None and s.trace.spans]
    if not traces:
        return
    from ragmeter.llm.prices import PriceTable

    table = table or PriceTable.load()
    for t in traces:
        price_trace(t, table)
