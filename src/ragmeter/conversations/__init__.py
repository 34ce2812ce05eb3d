"""Conversations: the multi-turn data shape (:class:`Conversation` of :class:`Turn` s), its
readers (ragmeter JSONL, DeepEval ``ConversationalTestCase``, ragas ``MultiTurnSample``,
OpenAI / Anthropic message lists) and writers, and how a run scores them (docs/conversations.md)."""

from ragmeter.conversations.model import Conversation, Turn, from_sample, to_samples
from ragmeter.conversations.readers import looks_like_conversation, parse_conversation

__all__ = ["Conversation", "Turn", "from_sample", "looks_like_conversation", "parse_conversation", "to_samples"]
