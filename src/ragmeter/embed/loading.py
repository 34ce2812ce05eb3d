"""Loading sentence-transformers models offline, and the row normalisation every backend uses.

Shared by the ``st`` encoder (:mod:`ragmeter.embed.encoders`) and the ONNX export
(:mod:`ragmeter.embed.onnx`), so neither backend module imports the other.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.embed.models import ModelRef, ModelUnavailableError, unavailable_message

#: Texts per forward pass. Measured on a 2-core CPU with all-MiniLM-L6-v2 (benchmarks/embeddings.py
#: --sweep, and paired runs): 16-32 is fastest for passages (64 ~10% slower, 128 ~25%); for short
#: answers 32 and 64 are equal within noise. torch's default thread count (one per core) beat one
#: thread by 1.5-1.8x, so ragmeter leaves it alone.
DEFAULT_BATCH_SIZE = 32

_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """``x`` as C-contiguous float32 with unit-length rows (an all-zero row stays zero)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-d array of embeddings, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.divide(x, norms, out=x, where=norms > 0)
    return x


@contextmanager
def offline() -> Iterator[None]:
    """Hugging Face libraries in offline mode for the duration of the block.

    Sets ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` and, as ``huggingface_hub`` reads them
    once at import, its module constant too; restores both afterwards.
    """
    saved = {k: os.environ.get(k) for k in _OFFLINE_VARS}
    os.environ.update({k: "1" for k in _OFFLINE_VARS})
    hub = sys.modules.get("huggingface_hub.constants")
    hub_prev = getattr(hub, "HF_HUB_OFFLINE", None)
    if hub is not None:
        hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        hub = sys.modules.get("huggingface_hub.constants")
        if hub is not None:
            hub.HF_HUB_OFFLINE = hub_prev if hub_prev is not None else any(
                (os.environ.get(k) or "").upper() in {"1", "ON", "YES", "TRUE"} for k in _OFFLINE_VARS)


def load_sentence_transformer(ref: ModelRef, *, device: str | None = None) -> Any:
    """Load ``ref`` with sentence-transformers, offline.

    Raises:
        ModelUnavailableError: sentence-transformers is not installed, or the model is neither a
            loadable local folder nor in the local Hugging Face cache.
    """
    if ref.local and not Path(ref.location).is_dir():
        raise ModelUnavailableError(unavailable_message(ref, "no such folder"))
    with offline():
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailableError(
                f"embedding model {ref.name!r} needs sentence-transformers: "
                f"pip install 'ragmeter-eval[embeddings]' ({exc})") from exc
        bar = _quiet_transformers()
        try:
            return SentenceTransformer(ref.location, device=device, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - OSError, ValueError, hub errors: all mean "not here"
            detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            raise ModelUnavailableError(unavailable_message(ref, detail)) from exc
        finally:
            bar()


def _quiet_transformers() -> Any:
    """Hide transformers' "Loading weights" bar during a load; returns the function that restores it."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return lambda: None
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    return hf_logging.enable_progress_bar if was else (lambda: None)
