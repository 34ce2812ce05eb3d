"""Conversation metrics (family ``conversation``): one value per conversation. Judge-based ones
(knowledge retention, role adherence, conversation relevancy, conversation completeness, topic
adherence) and per-turn tool correctness. Formulas and sources: docs/conversations.md."""

from ragmeter.metrics.conversation import deepeval_conv, judged, ragas_conversation, tools  # noqa: F401 - registers
