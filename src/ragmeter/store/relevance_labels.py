"""Where LLM relevance labels (qrels) are kept: the store's key-value table, namespace
``llm_qrels``, one row per (question, chunk text, judge model) key.

The judged metrics never touch the store: they ask their scoring context for this service,
``ctx.service("relevance_labels")`` (a :class:`RelevanceLabelStore` of the run's store), and hand it
the keys to look up and the labels to keep. Without a store (a run that keeps nothing) it holds
nothing and keeps nothing. The labels themselves (keys, judge requests, grades) are
:mod:`ragmeter.metrics.judge.relevance_labels`; reading them outside a run,
:mod:`ragmeter.analysis.qrels`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragmeter.core.context import ScoringContext, register_service

NAMESPACE = "llm_qrels"
#: the name a metric asks its scoring context for
SERVICE = "relevance_labels"


class RelevanceLabelStore:
    """The labels of one store (``None``: none kept)."""

    def __init__(self, store: Any = None) -> None:
        self.store = store

    @classmethod
    def from_context(cls, ctx: ScoringContext) -> RelevanceLabelStore:
        return cls(ctx.store)

    @property
    def keeps(self) -> bool:
        """Whether labels are kept (the run has a store)."""
        return self.store is not None

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored labels among ``keys`` (``{key: label row}``)."""
        keys = list(keys)
        return self.store.kv_get_many(NAMESPACE, keys) if self.store is not None and keys else {}

    def put_many(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep labels (``{key: label row}``); a label stored before under a key is replaced."""
        if self.store is None:
            return
        for key, value in rows.items():
            self.store.kv_put(NAMESPACE, key, dict(value))

    def with_prefix(self, prefix: str) -> dict[str, dict[str, Any]]:
        """Every stored label whose key starts with ``prefix`` (the labels of one question)."""
        if self.store is None:
            return {}
        from sqlalchemy import select

        from ragmeter.store.models import KeyValueRow

        with self.store.session() as sess:
            rows = sess.scalars(select(KeyValueRow).where(KeyValueRow.namespace == NAMESPACE,
                                                          KeyValueRow.key.like(prefix + "%"))).all()
            return {r.key: r.value for r in rows}


register_service(SERVICE, RelevanceLabelStore.from_context)
