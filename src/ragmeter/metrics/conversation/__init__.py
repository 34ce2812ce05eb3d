"""Conversation metrics (family ``conversation``): one value per conversation. Judge-based ones
(knowledge retention, role adherence, conversation relevancy, conversation completeness, topic
adherence) and per-turn tool correctness. Formulas and sources: docs/conversations.md."""

from ragmeter.metrics.conversation import (  # noqa: F401 - registers
    deepeval_conv,
    deepeval_dag_conv,
    deepeval_geval_conv,
    deepeval_mcp_conv,
    deepeval_turn_rag,
    deepeval_voice,
    judged,
    ragas_conversation,
    tools,
)
