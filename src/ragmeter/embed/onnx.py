"""ONNX Runtime backend: a sentence-transformers model exported once to ONNX, run without torch.

Select it with ``--option embedding_backend=onnx`` (or a model name ``onnx:<name>``); it needs
``pip install 'ragmeter-eval[onnx]'``. The first use exports the model's transformer with
``torch.onnx.export`` into ``$RAGMETER_CACHE_DIR/onnx`` (default ``~/.cache/ragmeter/onnx``); later
uses load the file and need neither torch nor sentence-transformers. Tokenisation uses the
model's own ``tokenizer.json`` (the same fast tokenizer sentence-transformers uses), with the
model's ``max_seq_length``; pooling (mean or CLS, from ``1_Pooling/config.json``) and the L2
normalisation are done in numpy. Embeddings match the ``st`` backend within 1e-6 for
all-MiniLM-L6-v2 (the test suite checks <= 1e-3 on varied texts).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.embed.loading import DEFAULT_BATCH_SIZE, load_sentence_transformer, normalise_rows
from ragmeter.embed.models import ModelRef, ModelUnavailableError, unavailable_message

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_dir() -> Path:
    """Where exported models are kept: ``$RAGMETER_CACHE_DIR/onnx`` or ``~/.cache/ragmeter/onnx``."""
    root = os.environ.get("RAGMETER_CACHE_DIR") or Path.home() / ".cache" / "ragmeter"
    return Path(root) / "onnx"


def _model_folder(ref: ModelRef) -> Path:
    if ref.local:
        folder = Path(ref.location)
        if not folder.is_dir():
            raise ModelUnavailableError(unavailable_message(ref, "no such folder"))
        return folder
    folder = _cached_snapshot(ref.location)
    if folder is None:
        raise ModelUnavailableError(unavailable_message(ref))
    return folder


def _hub_cache() -> Path:
    # read at call time: huggingface_hub reads these variables once, when it is first imported
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME")
    return Path(home) / "hub" if home else Path.home() / ".cache" / "huggingface" / "hub"


def _cached_snapshot(repo_id: str) -> Path | None:
    """The snapshot folder of ``repo_id`` in the local Hugging Face cache, or ``None``.

    Uses ``huggingface_hub.try_to_load_from_cache`` (a local lookup, never the network;
    huggingface_hub comes with ``tokenizers``, which the onnx extra needs anyway).
    """
    from huggingface_hub import try_to_load_from_cache

    for name in ("modules.json", "config.json"):
        found = try_to_load_from_cache(repo_id, name, cache_dir=_hub_cache())
        if isinstance(found, str):
            return Path(found).parent
    return None


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


class OnnxEncoder:
    """A sentence-transformers model run with ONNX Runtime (see the module docstring)."""

    def __init__(self, ref: ModelRef, *, batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailableError(f"the onnx embedding backend needs onnxruntime and tokenizers: "
                                        f"pip install 'ragmeter-eval[onnx]' ({exc})") from exc
        self.ref = ref
        self.model_id = ref.model_id
        self.batch_size = batch_size
        folder = _model_folder(ref)
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8")) \
            if (folder / "modules.json").is_file() else []
        transformer_dir = folder
        pooling_dir = None
        for m in modules:
            if m.get("type", "").endswith("Transformer"):
                transformer_dir = folder / m.get("path", "")
            elif m.get("type", "").endswith("Pooling"):
                pooling_dir = folder / m.get("path", "")
        pooling = _read_json(pooling_dir / "config.json") if pooling_dir else {"pooling_mode_mean_tokens": True}
        if pooling.get("pooling_mode_mean_tokens"):
            self.pooling = "mean"
        elif pooling.get("pooling_mode_cls_token"):
            self.pooling = "cls"
        else:
            raise ModelUnavailableError(f"embedding model {ref.name!r}: the onnx backend supports mean and CLS "
                                        f"pooling only; use the default backend (embedding_backend=st)")
        st_config = _read_json(transformer_dir / "sentence_bert_config.json")
        max_len = int(st_config.get("max_seq_length") or 512)
        tok_file = transformer_dir / "tokenizer.json"
        if not tok_file.is_file():
            raise ModelUnavailableError(f"embedding model {ref.name!r}: no tokenizer.json in {transformer_dir}; "
                                        "the onnx backend needs a fast tokenizer")
        self.tokenizer = Tokenizer.from_file(str(tok_file))
        self.tokenizer.enable_truncation(max_length=max_len)
        pad = _read_json(transformer_dir / "special_tokens_map.json").get("pad_token", "[PAD]")
        pad = pad["content"] if isinstance(pad, dict) else pad
        pad_id = self.tokenizer.token_to_id(pad)
        self.tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else 0, pad_token=pad)

        path = self._export(ref, folder, transformer_dir)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            opts.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self.session.get_inputs()]
        self._dim = int(self.session.get_outputs()[0].shape[-1]) if isinstance(
            self.session.get_outputs()[0].shape[-1], int) else 0
        self.path = path

    @property
    def dim(self) -> int:
        return self._dim

    @staticmethod
    def _export(ref: ModelRef, folder: Path, transformer_dir: Path) -> Path:
        weights = sorted(p for p in transformer_dir.iterdir() if p.suffix in {".safetensors", ".bin"})
        stamp = "|".join(f"{p.name}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in weights)
        key = hashlib.sha256(f"{ref.model_id}|{folder.resolve()}|{stamp}".encode()).hexdigest()[:20]
        path = cache_dir() / key / "model.onnx"
        if path.is_file():
            return path
        try:
            import torch
        except ImportError as exc:
            raise ModelUnavailableError("exporting a model to ONNX needs torch once (later runs do not): "
                                        f"pip install 'ragmeter-eval[embeddings,onnx]' ({exc})") from exc
        try:
            import onnx  # noqa: F401 - torch.onnx.export needs it
        except ImportError as exc:
            raise ModelUnavailableError(f"exporting a model to ONNX needs the onnx package: "
                                        f"pip install 'ragmeter-eval[onnx]' ({exc})") from exc
        st_model = load_sentence_transformer(ModelRef(ref.model_id, "st", str(folder), True, ref.name))
        hf_model = st_model[0].auto_model.eval()

        class _LastHidden(torch.nn.Module):
            def __init__(self, m: Any) -> None:
                super().__init__()
                self.m = m

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.m(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

        # a padded row in the example input, so the attention-mask path is part of the graph
        ids = torch.tensor([[101, 2000, 2001, 102], [101, 2000, 102, 0]], dtype=torch.long)
        mask = (ids != 0).long()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_LastHidden(hf_model), (ids, mask, torch.zeros_like(ids)), str(tmp),
                              input_names=list(_INPUTS), output_names=["last_hidden_state"],
                              dynamic_axes={n: {0: "batch", 1: "tokens"} for n in (*_INPUTS, "last_hidden_state")},
                              opset_version=17, dynamo=False)
        os.replace(tmp, path)
        return path

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        size = max(1, batch_size or self.batch_size)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        out: np.ndarray | None = None
        for start in range(0, len(order), size):
            idx = order[start:start + size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                m = feed["attention_mask"][..., None].astype(np.float32)
                pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
                self._dim = pooled.shape[1]
            out[idx] = pooled
        assert out is not None
        return normalise_rows(out)

    def __repr__(self) -> str:
        return f"OnnxEncoder({self.model_id!r}, path={str(self.path)!r})"
