"""ONNX Runtime backends: a sentence-transformers model exported once to ONNX, run without torch.

Select them with ``--option embedding_backend=onnx`` (float32) or ``embedding_backend=onnx-int8``
(int8 weights), or a model name ``onnx:<name>`` / ``onnx-int8:<name>``; they need
``pip install 'ragmeter-eval[onnx]'``. The first use exports the model's transformer with
``torch.onnx.export`` into ``$RAGMETER_CACHE_DIR/onnx`` (default ``~/.cache/ragmeter/onnx``), with
eager attention so that ONNX Runtime's transformer optimizer can fuse each layer's attention into
one ``Attention`` operator (BERT-family models; the fused graph is kept only when it gives the
same output as the plain export). ``onnx-int8`` quantises that file's weights to int8 once
(``onnxruntime.quantization.quantize_dynamic``, per channel) into ``model-int8.onnx`` beside it.
Later uses load the files and need neither torch nor sentence-transformers.

Tokenisation uses the model's own ``tokenizer.json`` (the same fast tokenizer sentence-transformers
uses), with the model's ``max_seq_length``; texts are sorted by token count, and a batch is padded
to its longest text and holds at most :data:`MAX_BATCH_TOKENS` padded tokens. Pooling (mean or
CLS, from ``1_Pooling/config.json``) and the L2 normalisation are done in numpy. float32 embeddings
match the ``st`` backend within 1e-6 for all-MiniLM-L6-v2; int8 ones move cosine similarities by up
to about 0.09 (0.086 over 2 million pairs of texts, measured in benchmarks/embeddings.py; docs/metrics/semantic.md has the figures).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.embed.loading import DEFAULT_BATCH_SIZE, load_sentence_transformer, normalise_rows
from ragmeter.embed.models import ModelRef, ModelUnavailableError, unavailable_message

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

#: Changes whenever the exported file changes for the same model (2: eager attention, fused).
_EXPORT_VERSION = 2

#: Padded tokens per forward pass at most (rows x longest text). Measured with all-MiniLM-L6-v2 on a
#: 2-core CPU: full-length passages (256 tokens) embed 10-20% faster 8 to a batch than 32, short
#: texts are indifferent (benchmarks/embeddings.py --sweep-onnx).
MAX_BATCH_TOKENS = 2048

#: Model types ONNX Runtime's transformer optimizer fuses as ``bert``.
_FUSABLE = {"bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra"}


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
    """A sentence-transformers model run with ONNX Runtime (see the module docstring).

    Args:
        ref: the resolved model; ``ref.backend == "onnx-int8"`` selects the int8 weights.
        batch_size: texts per forward pass at most (a batch also holds at most
            :data:`MAX_BATCH_TOKENS` padded tokens).
        threads: ONNX Runtime's intra-op threads (default: one per physical core).
        max_batch_tokens: padded tokens per forward pass at most.
    """

    def __init__(self, ref: ModelRef, *, batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None,
                 max_batch_tokens: int = MAX_BATCH_TOKENS) -> None:
        try:
            import onnxruntime  # noqa: F401 - the export's fusion and the default runtime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailableError(f"the {ref.backend} embedding backend needs onnxruntime and tokenizers: "
                                        f"pip install 'ragmeter-eval[onnx]' ({exc})") from exc
        self.ref = ref
        self.model_id = ref.model_id
        self.batch_size = batch_size
        self.max_batch_tokens = max(1, int(max_batch_tokens))
        self.quantized = ref.backend == "onnx-int8"
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
        self.tokenizer.no_padding()  # batches are padded here, each to its own longest text
        pad = _read_json(transformer_dir / "special_tokens_map.json").get("pad_token", "[PAD]")
        pad = pad["content"] if isinstance(pad, dict) else pad
        pad_id = self.tokenizer.token_to_id(pad)
        self.pad_id = pad_id if pad_id is not None else 0

        path = self._export(ref, folder, transformer_dir)
        self.fp32_path = path
        if self.quantized:
            path = _quantize(path)
        # one thread per core this process may run on (the runtimes' own defaults count the
        # machine's physical cores, which a container or a CPU affinity mask may not grant)
        self.threads = int(threads) if threads else usable_cores()
        self.session, self._inputs, self._dim = self._open(path)
        self.path = path

    def _open(self, path: Path) -> tuple[Any, list[str], int]:
        """The inference session of the file at ``path``: ``(session, input names, width or 0)``;
        the session has ONNX Runtime's ``run(None, feed) -> [last hidden state]``."""
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = self.threads
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        width = session.get_outputs()[0].shape[-1]
        return session, [i.name for i in session.get_inputs()], int(width) if isinstance(width, int) else 0

    @property
    def dim(self) -> int:
        return self._dim

    @staticmethod
    def _export(ref: ModelRef, folder: Path, transformer_dir: Path) -> Path:
        key = _export_key(folder, transformer_dir)
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
        # eager attention exports as MatMul/Softmax, the pattern ONNX Runtime fuses into one operator
        # (the SDPA export, with its NaN guards, is not fused)
        if hasattr(hf_model, "set_attn_implementation"):
            hf_model.set_attn_implementation("eager")
        else:  # older transformers
            hf_model.config._attn_implementation = "eager"

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
        _fuse(tmp, _read_json(transformer_dir / "config.json"))
        os.replace(tmp, path)
        return path

    def _batches(self, lengths: np.ndarray, size: int) -> list[np.ndarray]:
        """Indices of each forward pass: longest texts first, at most ``size`` rows and
        :attr:`max_batch_tokens` padded tokens (never fewer than one row)."""
        order = np.argsort(-lengths, kind="stable")
        out = []
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])
            rows = max(1, min(size, self.max_batch_tokens // max(1, longest)))
            out.append(order[start:start + rows])
            start += rows
        return out

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        size = max(1, batch_size or self.batch_size)
        encodings = self.tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        out: np.ndarray | None = None
        for idx in self._batches(lengths, size):
            width = int(lengths[idx[0]])
            ids = np.full((len(idx), width), self.pad_id, dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                e = encodings[i]
                n = len(e.ids)
                ids[row, :n] = e.ids
                types[row, :n] = e.type_ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                m = mask[..., None].astype(np.float32)
                pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
                self._dim = pooled.shape[1]
            out[idx] = pooled
        assert out is not None
        return normalise_rows(out)

    def __repr__(self) -> str:
        return f"OnnxEncoder({self.model_id!r}, path={str(self.path)!r})"


def _export_key(folder: Path, transformer_dir: Path) -> str:
    """The export's cache key: what the export and its agreement check depend on, not where the
    folder is (a copy of a model folder shares its export). The weights by name, size and
    modification time (a copy that keeps the times: ``shutil.copytree``); every other file of the
    folder (configurations, pooling, tokenizer: small) by its content."""
    h = hashlib.sha256(f"v{_EXPORT_VERSION}".encode())
    weights = sorted(p for p in transformer_dir.iterdir() if p.suffix in {".safetensors", ".bin"})
    for p in weights:
        st = p.stat()
        h.update(f"|{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix not in {".safetensors", ".bin", ".onnx", ".pt", ".h5", ".msgpack"}:
            if p.stat().st_size > 32 * 2**20:  # not a configuration: its name and size
                h.update(f"|{p.relative_to(folder)}:{p.stat().st_size}".encode())
                continue
            h.update(f"|{p.relative_to(folder)}|".encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:20]


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


#: The float32 export replaces sentence-transformers by default only if no cosine similarity
#: between two probe texts, and no component of an embedding, moves by more than this.
EQUAL_WITHIN = 1e-6

#: Texts the agreement check embeds both ways: short and long, padded and truncated, punctuation,
#: digits, accents and other scripts.
PROBE_TEXTS = (
    "The capital of France is Paris.", "Paris", "x", "42", "Ünïcödé — 東京は日本の首都です",
    "A Fähre fährt täglich um 9 Uhr; o ferry para São Paulo sai às 8h15.",
    "Refunds: 100% up to 48 h before departure, 50% afterwards, none after check-in.",
    "def refund(ticket): return ticket.price * 0.5", "word " * 300,
    "Check-in closes 20 minutes before departure. Bicycles travel free on the lower deck, "
    "but dogs must stay in the car or in the pet area on deck 5, as the crew will tell you.",
    "Quais são os documentos necessários para embarcar com uma criança menor de idade?",
)


def agreement(enc: OnnxEncoder) -> dict[str, Any]:
    """How far ``enc``'s float32 export is from sentence-transformers on :data:`PROBE_TEXTS`:
    ``{"max_abs_diff": largest |component difference|, "max_cos_diff": largest |difference| of a
    cosine similarity over every pair, "texts": n}``. Measured once per export and runtime (it loads
    the model with sentence-transformers) and kept as ``agreement.json`` (ONNX Runtime) or
    ``agreement-<runtime>.json`` beside it."""
    path = enc.fp32_path.with_name(getattr(enc, "AGREEMENT_FILE", "agreement.json"))
    found = _read_json(path)
    if {"max_abs_diff", "max_cos_diff"} <= found.keys() and found.get("texts") == len(PROBE_TEXTS):
        return found
    ref = enc.ref
    st_model = load_sentence_transformer(ModelRef(ref.model_id, "st", str(_model_folder(ref)), True, ref.name))
    texts = list(PROBE_TEXTS)
    a = normalise_rows(st_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                                       show_progress_bar=False))
    saved = enc.session
    if enc.quantized:
        import onnxruntime as ort

        enc.session = ort.InferenceSession(str(enc.fp32_path), providers=["CPUExecutionProvider"])
    try:
        b = enc.encode(texts, batch_size=4)
    finally:
        enc.session = saved
    iu = np.triu_indices(len(texts), k=1)
    out = {"max_abs_diff": float(np.abs(a - b).max()),
           "max_cos_diff": float(np.abs((a @ a.T)[iu] - (b @ b.T)[iu]).max()), "texts": len(texts)}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(out), encoding="utf-8")
    os.replace(tmp, path)
    return out


def same_values(enc: OnnxEncoder) -> bool:
    """Whether ``enc`` (float32) gives sentence-transformers' values within :data:`EQUAL_WITHIN`."""
    if enc.quantized:
        return False
    found = agreement(enc)
    return max(found["max_abs_diff"], found["max_cos_diff"]) <= EQUAL_WITHIN


def _fuse(path: Path, config: dict[str, Any]) -> bool:
    """Rewrite the export at ``path`` with ONNX Runtime's transformer optimizer (fused attention,
    embedding and skip layer norms) when the model is of a BERT-like type and the fused graph
    gives the same hidden states as the plain one on a padded batch; otherwise leave it as it is.
    Returns whether it was fused."""
    heads, hidden = config.get("num_attention_heads") or config.get("n_heads"), \
        config.get("hidden_size") or config.get("dim")
    if config.get("model_type") not in _FUSABLE or not heads or not hidden:
        return False
    import onnxruntime as ort

    fused = path.with_name(path.name + ".fused")
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        with _quiet_logging():
            model = optimize_model(str(path), model_type="bert", num_heads=int(heads), hidden_size=int(hidden),
                                   opt_level=0)
        if not model.get_fused_operator_statistics().get("Attention"):
            return False
        model.save_model_to_file(str(fused))
        rng = np.random.default_rng(0)
        ids = rng.integers(1000, 2000, size=(3, 24), dtype=np.int64)
        mask = np.ones_like(ids)
        mask[1, 10:] = 0
        mask[2, 3:] = 0
        ids[mask == 0] = 0
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        outs = []
        for p in (path, fused):
            s = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
            names = {i.name for i in s.get_inputs()}
            outs.append(s.run(None, {k: v for k, v in feed.items() if k in names})[0])
        valid = mask.astype(bool)
        if outs[0].shape != outs[1].shape or np.abs(outs[0][valid] - outs[1][valid]).max() > 1e-4:
            return False
        os.replace(fused, path)
        return True
    except Exception:  # noqa: BLE001 - fusion is an optimisation: the plain export still works
        return False
    finally:
        fused.unlink(missing_ok=True)


def _quantize(path: Path) -> Path:
    """``model-int8.onnx`` beside the float32 export ``path``: its weights quantised to int8 once
    (dynamic quantisation, per output channel); reused afterwards."""
    out = path.with_name("model-int8.onnx")
    if out.is_file():
        return out
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ModelUnavailableError(f"quantising a model to int8 needs onnxruntime and onnx: "
                                    f"pip install 'ragmeter-eval[onnx]' ({exc})") from exc
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    try:
        with _quiet_logging():
            quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                             # fused operators carry no inferred output types: theirs are float
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


class _quiet_logging:
    """ONNX Runtime's optimizer and quantiser log advice on the root logger: hide it for a block."""

    def __enter__(self) -> None:
        self.was = logging.root.manager.disable
        logging.disable(logging.WARNING)

    def __exit__(self, *exc: object) -> None:
        logging.disable(self.was)
