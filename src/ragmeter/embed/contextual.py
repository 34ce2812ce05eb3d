"""Contextual token embeddings (one vector per word piece, from a chosen layer of a Hugging Face
encoder): what BERTScore matches, and the run's ``token_embeddings`` service that serves them.

Tokenisation follows the ``bert-score`` package (0.3.13) exactly: ``tokenizer.encode(text.strip(),
add_special_tokens=True, max_length=tokenizer.model_max_length, truncation=True)``, and a blank text
is just the special tokens. The model is the transformer of a sentence-transformers folder (the
bundled all-MiniLM-L6-v2 by default) or any Hugging Face encoder folder, loaded offline.

Each text is run through the model on its own (no padding), so a text's vectors are the same
whatever batch it came in: a run split into batches or pieces gives the same values. The vectors
stay in memory for the run (a token matrix per text is too large for the store's embedding cache).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.context import register_service
from ragmeter.core.errors import ConfigError
from ragmeter.embed.loading import _quiet_transformers, offline
from ragmeter.embed.models import ModelRef, ModelUnavailableError, resolve_model, unavailable_message
from ragmeter.embed.service import _mapping_option


def transformer_folder(location: str) -> str:
    """The folder of the Hugging Face transformer inside a sentence-transformers folder (the root,
    or the path its ``modules.json`` gives the ``Transformer`` module), or ``location`` itself."""
    root = Path(location)
    modules = root / "modules.json"
    if not (root / "config.json").is_file() and modules.is_file():
        try:
            entries = json.loads(modules.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            entries = []
        for e in entries if isinstance(entries, list) else []:
            if isinstance(e, Mapping) and str(e.get("type", "")).endswith("Transformer"):
                return str(root / str(e.get("path") or ""))
    return location


class TokenEncoder:
    """A Hugging Face encoder giving each text's token ids and its hidden states at a layer.

    Args:
        ref: the resolved model (:func:`ragmeter.embed.resolve_model`).
        device: torch device (default CPU).

    Raises:
        ModelUnavailableError: transformers is missing, or the model is not on this machine.
    """

    def __init__(self, ref: ModelRef, *, device: str | None = None) -> None:
        if ref.backend != "st":
            raise ModelUnavailableError(f"token embeddings need a Hugging Face encoder; {ref.name!r} is a "
                                        f"{ref.backend} model (use a sentence-transformers or Hugging Face folder)")
        if ref.local and not Path(ref.location).is_dir():
            raise ModelUnavailableError(unavailable_message(ref, "no such folder"))
        self.ref = ref
        location = transformer_folder(ref.location) if ref.local else ref.location
        with offline():
            try:
                import torch
                from transformers import AutoModel, AutoTokenizer
            except ImportError as exc:
                raise ModelUnavailableError(f"token embeddings need transformers and torch: "
                                            f"pip install 'ragmeter-eval[embeddings]' ({exc})") from exc
            restore = _quiet_transformers()
            try:
                # bert-score loads the tokenizer with use_fast=False; the ids are what must match
                self.tokenizer = AutoTokenizer.from_pretrained(location, use_fast=False, local_files_only=True)
                self.model = AutoModel.from_pretrained(location, local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - OSError, ValueError, hub errors: all mean "not here"
                detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                raise ModelUnavailableError(unavailable_message(ref, detail)) from exc
            finally:
                restore()
        self.model.eval()
        if device:
            self.model.to(device)
        self.device = device
        self._torch = torch
        self.n_layers = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)

    @property
    def special_ids(self) -> set[int]:
        """The ids bert-score gives weight 0: the tokenizer's [CLS] and [SEP]."""
        return {i for i in (self.tokenizer.cls_token_id, self.tokenizer.sep_token_id) if i is not None}

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text`` as bert-score's ``sent_encode`` makes them."""
        text = text.strip()
        if not text:
            # bert-score's build_inputs_with_special_tokens([]) (gone from transformers 5): [CLS] [SEP]
            return list(self.tokenizer.encode("", add_special_tokens=True))
        return list(self.tokenizer.encode(text, add_special_tokens=True,
                                          max_length=self.tokenizer.model_max_length, truncation=True))

    def layer(self, num_layers: int | None) -> int:
        """The layer a ``num_layers`` option means (``None``: the last one), checked."""
        if num_layers is None:
            return self.n_layers
        n = int(num_layers)
        if not 1 <= n <= self.n_layers:
            raise ConfigError(f"num_layers must be between 1 and {self.n_layers} for {self.ref.name}, got {num_layers!r}")
        return n

    def hidden(self, ids: Sequence[int], layer: int) -> np.ndarray:
        """The output of layer ``layer`` for one text's ids: ``(len(ids), dim)`` float32, rows of unit length."""
        torch = self._torch
        # one text is too small a matrix to share between threads: on a busy 2-core machine torch's
        # default (a thread per core) measured 15x slower than one thread (1.5 s vs 0.1 s for 82
        # pieces); the caller's setting is restored
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.inference_mode():
                x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
                out = self.model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True)
                h = out.hidden_states[layer][0].float().cpu().numpy().astype(np.float32)
        finally:
            torch.set_num_threads(threads)
        norms = np.linalg.norm(h, axis=1, keepdims=True)
        np.divide(h, norms, out=h, where=norms > 0)
        return h


def idf_weights(documents: Iterable[Sequence[int]], ids: Iterable[int]) -> dict[int, float]:
    """bert-score's idf: ``log((M + 1) / (df(t) + 1))`` over ``M`` documents (each document's set of
    ids counted once), ``log(M + 1)`` for an id no document has; for the ``ids`` asked."""
    docs = list(documents)
    df: Counter[int] = Counter()
    for d in docs:
        df.update(set(d))
    m = len(docs)
    return {t: math.log((m + 1) / (df.get(t, 0) + 1)) for t in set(ids)}


class TokenEmbeddingService:
    """A run's token embeddings: each (model, layer, text) computed once and kept in memory.

    Options read: ``embedding_model_paths`` (``{name: folder}``) and ``embedding_device``, as the
    ``embeddings`` service reads them. Metrics ``request`` texts in ``prepare``; the runner calls
    :meth:`flush`; :meth:`tokens` then serves ``(ids, unit rows)``.
    """

    def __init__(self, options: Mapping[str, Any] | None = None, progress: Any = None) -> None:
        opts = dict(options or {})
        self.paths = _mapping_option(opts.get("embedding_model_paths"), "embedding_model_paths")
        self.device: str | None = opts.get("embedding_device") or None
        self.progress = progress or (lambda desc, total: (lambda n: None))
        self._encoders: dict[str, TokenEncoder] = {}
        self._failed: dict[str, ModelUnavailableError] = {}
        self._pending: dict[tuple[str | None, int | None], dict[str, None]] = {}
        self._vectors: dict[tuple[str, int, str], tuple[np.ndarray, np.ndarray]] = {}
        self._idf_docs: dict[str, list[str]] = {}
        self.computed = 0

    @classmethod
    def from_context(cls, ctx: Any) -> TokenEmbeddingService:
        return cls(ctx.options, ctx.progress)

    def ref(self, model: str | None) -> ModelRef:
        return resolve_model(model, paths=self.paths)

    def encoder(self, model: str | None) -> TokenEncoder:
        """The loaded encoder of ``model`` (``None``: the bundled all-MiniLM-L6-v2).

        Raises:
            ModelUnavailableError: it cannot be loaded here (remembered: asked again, the same error).
        """
        ref = self.ref(model)
        mid = ref.model_id
        if mid in self._failed:
            raise self._failed[mid]
        if mid not in self._encoders:
            try:
                self._encoders[mid] = TokenEncoder(ref, device=self.device)
            except ModelUnavailableError as exc:
                self._failed[mid] = exc
                raise
        return self._encoders[mid]

    def request(self, texts: Iterable[str], model: str | None = None, num_layers: int | None = None) -> None:
        bucket = self._pending.setdefault((model, num_layers), {})
        for t in texts:
            bucket[t] = None

    def set_idf_documents(self, documents: Sequence[str], model: str | None = None) -> None:
        """The documents idf is counted over for ``model`` (the run's references, set in ``prepare``)."""
        self._idf_docs[self.ref(model).model_id] = list(documents)

    def idf_documents(self, model: str | None = None) -> list[str] | None:
        """The documents set by :meth:`set_idf_documents` (``None``: none were)."""
        return self._idf_docs.get(self.ref(model).model_id)

    def flush(self) -> None:
        pending, self._pending = self._pending, {}
        for (model, num_layers), bucket in pending.items():
            try:
                enc = self.encoder(model)
                layer = enc.layer(num_layers)
            except (ModelUnavailableError, ConfigError):
                continue  # tokens() raises the reason for each sample
            todo = [t for t in bucket if (enc.ref.model_id, layer, t) not in self._vectors]
            if not todo:
                continue
            advance = self.progress(f"token embeddings ({enc.ref.model_id.rsplit('/', 1)[-1]}, layer {layer})", len(todo))
            for t in todo:
                self.tokens(t, model, num_layers)
                advance(1)

    def tokens(self, text: str, model: str | None = None, num_layers: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, rows)`` of ``text``: its token ids and their unit-length vectors at the layer.

        Raises:
            ModelUnavailableError: the model cannot be loaded here.
            ConfigError: ``num_layers`` is not a layer of the model.
        """
        enc = self.encoder(model)
        layer = enc.layer(num_layers)
        key = (enc.ref.model_id, layer, text)
        hit = self._vectors.get(key)
        if hit is None:
            ids = enc.ids(text)
            hit = (np.asarray(ids, dtype=np.int64), enc.hidden(ids, layer))
            self._vectors[key] = hit
            self.computed += 1
        return hit

    def stats(self) -> dict[str, Any]:
        return {"computed": self.computed, "models": sorted(self._encoders)}


register_service("token_embeddings", TokenEmbeddingService.from_context)
