"""The fields of ragas' ``SingleTurnSample`` / ``MultiTurnSample`` that have no column of their own in
ragmeter's schema: read from a row by name and kept in the sample's (or the conversation's)
``metadata``, where ragas' metrics under ragas' names (``ragas:*``) find them.

ragas' other fields map to the schema (io/readers.py ``FIELD_ALIASES``): ``user_input`` is the
question (a list of messages: a conversation), ``response`` the answer, ``reference`` the reference,
``retrieved_contexts`` the contexts, ``reference_contexts`` the relevant chunks (the SQL schema of
``ragas:sql_semantic_equivalence``, the text of ``ragas:summary_score``).
"""

from __future__ import annotations

#: ragas fields kept in metadata: per-sample rubrics (``InstanceSpecificRubrics``), the expected tool
#: calls (``ToolCallAccuracy``, ``ToolCallF1``; a multi-turn row's are checked by
#: ``conversations.readers``), the allowed topics (``TopicAdherence``)
RAGAS_METADATA = ("rubrics", "reference_tool_calls", "reference_topics")

