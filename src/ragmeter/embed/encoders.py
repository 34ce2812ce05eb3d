"""Encoders: turn texts into L2-normalised float32 rows. One small protocol, five backends.

- ``st``: sentence-transformers, from a local folder or the local Hugging Face cache, always with
  ``HF_HUB_OFFLINE=1`` and ``local_files_only`` (ragmeter never downloads a model). When no backend
  was asked for, the model runs on its float32 ONNX export instead (with OpenVINO when installed,
  else ONNX Runtime) if that gives the same values within 1e-6 (checked once per export and
  runtime; faster, and no torch to import once exported).
- ``onnx`` / ``onnx-int8``: the same model exported once to ONNX and run with ONNX Runtime, with
  float32 or int8 weights (see :mod:`ragmeter.embed.onnx`).
- ``openvino``: the float32 export run with OpenVINO (see :mod:`ragmeter.embed.openvino`); the
  default's first choice when installed and equal within 1e-6.
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint through the official SDK.

Loaded encoders are kept for the life of the process, so a second run (or a second metric on
the same model) does not load the model again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragmeter.embed.loading import (  # noqa: F401 - re-exported
    DEFAULT_BATCH_SIZE,
    load_sentence_transformer,
    normalise_rows,
    offline,
)
from ragmeter.embed.models import ModelRef, ModelUnavailableError, resolve_model


@runtime_checkable
class Encoder(Protocol):
    """Anything that embeds texts.

    Attributes:
        model_id: the id the embedding cache is keyed by; two encoders with the same id must
            produce the same vectors.
    """

    model_id: str

    @property
    def dim(self) -> int:
        """Length of one embedding (0 while unknown, e.g. before an endpoint's first reply)."""
        ...

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embed ``texts``: a ``(len(texts), dim)`` float32 array with L2-normalised rows."""
        ...


class SentenceTransformerEncoder:
    """A sentence-transformers model loaded from disk (a folder or the local HF cache), never the network."""

    def __init__(self, ref: ModelRef, *, device: str | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.ref = ref
        self.model_id = ref.model_id
        self.batch_size = batch_size
        self.model = load_sentence_transformer(ref, device=device)
        width = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self._dim = int(width() or 0)

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        x = self.model.encode(texts, batch_size=batch_size or self.batch_size, convert_to_numpy=True,
                              normalize_embeddings=True, show_progress_bar=False)
        return normalise_rows(np.asarray(x))

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder({self.model_id!r}, location={self.ref.location!r})"


class OpenAIEncoder:
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, vLLM, Ollama, llama.cpp, LM Studio...).

    Retries on 429/5xx/timeouts are the SDK's (exponential backoff, ``max_retries``). Endpoints may
    return unnormalised vectors; rows are L2-normalised here.
    """

    def __init__(self, ref: ModelRef, *, api_key_env: str = "OPENAI_API_KEY", batch_size: int = 256,
                 timeout: float = 60.0, max_retries: int = 5) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ModelUnavailableError(f"embedding model {ref.name!r} needs the openai SDK: "
                                        f"pip install 'ragmeter-eval[openai]' ({exc})") from exc
        key = os.environ.get(api_key_env)
        base_url = ref.base_url or os.environ.get("OPENAI_BASE_URL")
        if not key:
            if not base_url:
                raise ModelUnavailableError(
                    f"embedding model {ref.name!r}: set the API key in ${api_key_env} (or name another "
                    "variable with --option embedding_api_key_env=VAR), or point "
                    "--option embedding_base_url=URL at a local OpenAI-compatible server")
            key = "no-key"  # local servers ignore it; the SDK insists on one
        self.ref = ref
        self.model_id = ref.model_id
        self.batch_size = batch_size
        self._client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout,
                                     max_retries=max_retries)
        self._dim = 0

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        texts = list(texts)
        size = max(1, batch_size or self.batch_size)
        parts = []
        for i in range(0, len(texts), size):
            chunk = texts[i:i + size]
            resp = self._client.embeddings.create(model=self.ref.location, input=chunk)
            rows = sorted(resp.data, key=lambda d: d.index)
            if len(rows) != len(chunk):
                raise RuntimeError(f"embeddings endpoint returned {len(rows)} vectors for {len(chunk)} texts")
            parts.append(np.asarray([r.embedding for r in rows], dtype=np.float32))
        if not parts:
            return np.zeros((0, self._dim), dtype=np.float32)
        x = normalise_rows(np.concatenate(parts))
        self._dim = x.shape[1]
        return x

    def __repr__(self) -> str:
        return f"OpenAIEncoder({self.model_id!r})"


_ENCODERS: dict[tuple[Any, ...], Encoder] = {}
_LOCK = threading.Lock()


def load_encoder(ref: ModelRef, *, device: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY") -> Encoder:
    """The encoder for ``ref``, loaded once per process.

    Raises:
        ModelUnavailableError: the model or its backend's extra is not available (the message says
            how to provide it).
    """
    key: tuple[Any, ...] = (ref.backend, ref.model_id, ref.location, device,
                            api_key_env if ref.backend == "openai" else None, ref.explicit)
    with _LOCK:
        enc = _ENCODERS.get(key)
        if enc is None:
            if ref.backend == "st":
                enc = _same_values_on_onnx(ref, device) or SentenceTransformerEncoder(ref, device=device)
            elif ref.backend in ("onnx", "onnx-int8"):
                from ragmeter.embed.onnx import OnnxEncoder

                enc = OnnxEncoder(ref)
            elif ref.backend == "openvino":
                from ragmeter.embed.openvino import OpenVinoEncoder

                enc = OpenVinoEncoder(ref)
            else:
                enc = OpenAIEncoder(ref, api_key_env=api_key_env)
            _ENCODERS[key] = enc
    return enc


def _same_values_on_onnx(ref: ModelRef, device: str | None) -> Encoder | None:
    """The float32 ONNX export of ``ref`` when nobody asked for a backend, the run is on the CPU,
    ONNX Runtime is installed and the export gives sentence-transformers' values within 1e-6
    (:func:`ragmeter.embed.onnx.same_values`), run with OpenVINO when that is installed and also
    gives them (it is faster), else with ONNX Runtime; ``None`` otherwise. It keeps ``ref``'s model
    id: its vectors are the sentence-transformers ones, so the embedding cache is shared."""
    if ref.explicit or device not in (None, "cpu"):
        return None
    import importlib.util

    if not all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers")):
        return None
    from dataclasses import replace

    from ragmeter.embed.onnx import OnnxEncoder, same_values

    if importlib.util.find_spec("openvino"):
        from ragmeter.embed.openvino import OpenVinoEncoder

        try:
            enc: OnnxEncoder = OpenVinoEncoder(replace(ref, backend="onnx"))
            if same_values(enc):
                return enc
        except Exception:  # noqa: BLE001 - OpenVINO cannot read or compile the export: ONNX Runtime serves
            pass
    try:
        enc = OnnxEncoder(replace(ref, backend="onnx"))
        return enc if same_values(enc) else None
    except Exception:  # noqa: BLE001 - no onnx package for the export, an unsupported pooling, a failed
        return None    # export: sentence-transformers serves, as when ONNX Runtime is not installed


def get_encoder(model: str | None = None, *, paths: Mapping[str, Any] | None = None,
                backend: str | None = None, base_url: str | None = None, device: str | None = None,
                api_key_env: str = "OPENAI_API_KEY") -> Encoder:
    """An encoder for ``model``: the bundled all-MiniLM-L6-v2 by default, loaded with no network.

    Args:
        model: a name :func:`ragmeter.embed.resolve_model` understands (``None`` = default model,
            a Hugging Face repo id in the local cache, a local folder, ``openai:<model>``, ``onnx:<model>``,
            ``onnx-int8:<model>``, ``openvino:<model>``).
        paths: ``{model name or bert_* key: local folder}`` overrides.
        backend: backend for names without a prefix (default ``st``).
        base_url: endpoint of the ``openai`` backend.
        device: torch device for ``st`` (default: sentence-transformers' choice).
        api_key_env: environment variable holding the ``openai`` backend's key.

    Returns:
        An :class:`Encoder`; ``encode(texts)`` gives ``(n, dim)`` float32 with unit rows.

    Raises:
        ModelUnavailableError: the model is not available locally, or its extra is missing.

    Example:
        >>> enc = get_encoder()
        >>> x = enc.encode(["The capital of France is Paris", "Paris"])
        >>> x.shape, round(float(x[0] @ x[1]), 2)  # doctest: +SKIP
        ((2, 384), 0.7)
    """
    ref = resolve_model(model, paths=paths, backend=backend, base_url=base_url)
    return load_encoder(ref, device=device, api_key_env=api_key_env)
