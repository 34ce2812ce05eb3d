"""OpenVINO backend: the float32 ONNX export of :mod:`ragmeter.embed.onnx` run with OpenVINO.

Select it with ``--option embedding_backend=openvino`` or a model name ``openvino:<name>``; it
needs ``pip install 'ragmeter-eval[onnx]'`` (which brings ``openvino`` beside ``onnxruntime``).
When no backend is asked for and OpenVINO is installed, the default embeds with it if its values
equal sentence-transformers' within 1e-6 (measured once per export, kept as
``agreement-openvino.json`` beside the export); otherwise with ONNX Runtime, otherwise with
sentence-transformers.

It reads the same fused export (``model.onnx``: ONNX Runtime's ``Attention``,
``SkipLayerNormalization`` and ``BiasGelu`` operators, which OpenVINO's ONNX reader knows) and
compiles it for the CPU with:

- ``INFERENCE_PRECISION_HINT=f32``: on a CPU with AMX or AVX-512 BF16 OpenVINO would otherwise
  run in bfloat16 (cosines off by about 1e-3);
- ``PERFORMANCE_HINT=LATENCY`` (one stream) and one thread per usable core: the batches are
  run one after another, each with every core;
- dynamic shapes: each batch is padded to its own longest text, as with ONNX Runtime.

The compiled model is cached by OpenVINO in ``openvino/`` beside the export (its
``CACHE_DIR``), so later processes skip the compilation; the export's folder is keyed by the
model's content, not by where its folder is. Tokenisation, length batching, pooling and
normalisation are :class:`~ragmeter.embed.onnx.OnnxEncoder`'s.

Measured with all-MiniLM-L6-v2 on 2 cores (Sapphire Rapids, AVX-512): the 4,000 texts of
``benchmarks/embeddings.py`` in 0.61-0.88 of ONNX Runtime's time, values within 2.4e-7 of
sentence-transformers' (docs/performance.md has the figures and their load averages).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.embed.loading import DEFAULT_BATCH_SIZE
from ragmeter.embed.models import ModelRef, ModelUnavailableError
from ragmeter.embed.onnx import MAX_BATCH_TOKENS, OnnxEncoder


class _Session:
    """An OpenVINO compiled model behind ONNX Runtime's ``run(None, feed)``: one infer request,
    used by one thread at a time (an infer request is not thread-safe; the outputs are copied
    before the lock is released, as the next inference overwrites them)."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.output = compiled.outputs[0]
        self._lock = threading.Lock()

    def run(self, _outputs: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            result = self.request.infer(feed)
            return [np.array(result[self.output], copy=True)]


class OpenVinoEncoder(OnnxEncoder):
    """A sentence-transformers model's float32 ONNX export run with OpenVINO (see the module docstring).

    Args:
        ref: the resolved model (``ref.backend`` is ``openvino``, or ``onnx`` for the default's choice).
        batch_size: texts per forward pass at most.
        threads: OpenVINO's inference threads (default: one per usable core).
        max_batch_tokens: padded tokens per forward pass at most.
    """

    AGREEMENT_FILE = "agreement-openvino.json"

    def __init__(self, ref: ModelRef, *, batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None,
                 max_batch_tokens: int = MAX_BATCH_TOKENS) -> None:
        try:
            import openvino  # noqa: F401
        except ImportError as exc:
            raise ModelUnavailableError(f"the openvino embedding backend needs openvino: "
                                        f"pip install 'ragmeter-eval[onnx]' ({exc})") from exc
        super().__init__(ref, batch_size=batch_size, threads=threads, max_batch_tokens=max_batch_tokens)

    def _open(self, path: Path) -> tuple[Any, list[str], int]:
        import openvino as ov
        import openvino.properties as props
        import openvino.properties.hint as hints

        core = ov.Core()
        config = {
            hints.inference_precision: ov.Type.f32,  # never bfloat16 on AMX / AVX-512 BF16 CPUs
            hints.performance_mode: hints.PerformanceMode.LATENCY,
            props.inference_num_threads: self.threads,
            props.cache_dir: str(path.parent / "openvino"),
        }
        compiled = core.compile_model(str(path), "CPU", config)
        width = compiled.outputs[0].get_partial_shape()[-1]
        names = [i.get_any_name() for i in compiled.inputs]
        return _Session(compiled), names, width.get_length() if width.is_static else 0

    def __repr__(self) -> str:
        return f"OpenVinoEncoder({self.model_id!r}, path={str(self.path)!r})"
