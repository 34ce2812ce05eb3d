"""The ``embeddings`` service of a run: every distinct text embedded once, persisted in the store.

Metrics call :meth:`EmbeddingService.request` in ``prepare()``; the runner calls :meth:`flush` once;
metrics then read rows with :meth:`matrix`. A text already in the store's embedding cache (keyed
by model id + sha256 of the text) is read, not embedded, so a re-run or a resumed run embeds
nothing it has seen. The model is loaded only when something has to be embedded.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError
from ragmeter.embed.encoders import DEFAULT_BATCH_SIZE, Encoder, load_encoder
from ragmeter.embed.models import EmbeddingError, ModelRef, ModelUnavailableError, resolve_model

#: Batches handed to the encoder per call: the progress bar moves and the store is written this often.
BLOCK_BATCHES = 16

Progress = Callable[[str, int], Callable[[int], None]]


def text_hash(text: str) -> str:
    """The cache key of a text: hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_blank(text: str) -> bool:
    """Whitespace-only texts are not embedded: their row is all zeros (cosine 0 with anything)."""
    return not text.strip()


class EmbeddingService:
    """Embeds each distinct text once per model, backed by the store's persistent cache.

    Options (run options, ``--option key=value``): ``embedding_model`` (default model for requests
    with ``model=None``), ``embedding_model_paths`` (``{name or bert_* key: folder}``),
    ``embedding_backend`` (``st``, ``onnx``, ``onnx-int8``, ``openvino``, ``openai``), ``embedding_base_url``,
    ``embedding_api_key_env``, ``embedding_device``, ``embedding_batch_size``.

    Args:
        store: a :class:`ragmeter.store.Store` for the persistent cache, or ``None`` (memory only).
        options: run options (see above).
        progress: ``progress(description, total) -> advance(n)``.
    """

    def __init__(self, store: Any = None, options: Mapping[str, Any] | None = None,
                 progress: Progress | None = None) -> None:
        opts = dict(options or {})
        self.store = store
        self.progress: Progress = progress or (lambda desc, total: (lambda n: None))
        self.default_model: str | None = opts.get("embedding_model") or None
        self.paths = _mapping_option(opts.get("embedding_model_paths"), "embedding_model_paths")
        self.backend: str | None = opts.get("embedding_backend") or None
        self.base_url: str | None = opts.get("embedding_base_url") or None
        self.api_key_env: str = opts.get("embedding_api_key_env") or "OPENAI_API_KEY"
        self.device: str | None = opts.get("embedding_device") or None
        try:
            raw = opts.get("embedding_batch_size")
            self.batch_size: int | None = None if raw in (None, "") else int(raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"option embedding_batch_size must be an integer: {exc}") from exc
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError("option embedding_batch_size must be >= 1")
        self._refs: dict[str | None, ModelRef] = {}
        self._pending: dict[str, tuple[ModelRef, dict[str, None]]] = {}
        self._vectors: dict[str, dict[str, np.ndarray]] = {}
        self._dims: dict[str, int] = {}
        self._failed: dict[str, ModelUnavailableError | EmbeddingError] = {}
        self._computed: Counter[str] = Counter()
        self._cached: Counter[str] = Counter()
        self._encode_s = 0.0
        #: encodes texts elsewhere (``(ref, items, batch_size=, batches_per_call=, device=)`` yielding
        #: ``(part, vectors, where)``): set for a run on Ray (:mod:`ragmeter.run.engines.ray_embed`)
        self.remote: Callable[..., Iterable[tuple[list[tuple[str, str]], np.ndarray, dict[str, Any]]]] | None = None
        self._remote_seen: Counter[tuple[str, str, str]] = Counter()

    @classmethod
    def from_context(cls, ctx: Any) -> EmbeddingService:
        """The service for a :class:`ragmeter.core.context.ScoringContext` (its store, options, progress;
        a context of a Ray run sets ``remote_embed``: texts are then encoded on the cluster)."""
        svc = cls(store=ctx.store, options=ctx.options, progress=ctx.progress)
        svc.remote = getattr(ctx, "remote_embed", None)
        return svc

    # ---- names -----------------------------------------------------------------------------

    def ref(self, model: str | None = None) -> ModelRef:
        """What ``model`` (``None`` = the run's ``embedding_model``, else the bundled default) resolves to."""
        name = model or self.default_model
        if name not in self._refs:
            self._refs[name] = resolve_model(name, paths=self.paths, backend=self.backend,
                                             base_url=self.base_url)
        return self._refs[name]

    def model_id(self, model: str | None = None) -> str:
        return self.ref(model).model_id

    # ---- the three calls metrics make -----------------------------------------------------------

    def request(self, texts: Iterable[str], model: str | None = None) -> None:
        """Note ``texts`` to embed with ``model`` at the next :meth:`flush` (call in ``prepare``)."""
        ref = self.ref(model)
        _, bucket = self._pending.setdefault(ref.model_id, (ref, {}))
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts to embed must be str, got {type(t).__name__}")
            bucket[t] = None

    def flush(self) -> None:
        """Embed everything requested: deduplicate, read the store's cache, embed the rest in
        batches (with a progress bar), write them to the cache. A model that cannot be used is
        remembered; :meth:`matrix` then raises its reason."""
        pending, self._pending = self._pending, {}
        for ref, bucket in pending.values():
            self._ensure(ref, bucket, bulk=True)

    def matrix(self, texts: Sequence[str], model: str | None = None) -> np.ndarray:
        """Rows for ``texts`` (embedding any not seen yet): ``(len(texts), dim)`` float32.

        Rows are L2-normalised, except that blank (whitespace-only) texts get an all-zero row,
        so their cosine with anything is 0.

        Raises:
            ModelUnavailableError: the model is not available (the message says how to provide it).
            EmbeddingError: embedding failed at run time (e.g. the endpoint kept failing).
        """
        ref = self.ref(model)
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts to embed must be str, got {type(t).__name__}")
        self._ensure(ref, texts)
        mid = ref.model_id
        if mid in self._failed:
            raise self._failed[mid]
        vecs = self._vectors.setdefault(mid, {})
        dim = self._dim(ref)
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        zero = np.zeros(dim, dtype=np.float32)
        return np.stack([vecs.get(t, zero) for t in texts])

    def stats(self) -> dict[str, Any]:
        """``{"computed": N, "cached": M, "model": id or [ids], "encode_s": s}`` (+ per-model
        figures when several models were used, and the reason for each unusable model)."""
        models = list(dict.fromkeys([*self._vectors, *self._failed]))
        out: dict[str, Any] = {
            "computed": int(sum(self._computed.values())),
            "cached": int(sum(self._cached.values())),
            "model": (models[0] if len(models) == 1 else models) if models else None,
            "encode_s": round(self._encode_s, 4),
        }
        if len(models) > 1:
            out["by_model"] = {m: {"computed": self._computed[m], "cached": self._cached[m]} for m in models}
        if self._failed:
            out["unavailable"] = {m: str(e) for m, e in self._failed.items()}
        if self._remote_seen:
            out["ray"] = {"texts": int(sum(self._remote_seen.values())),
                          "actors": len({(n, p) for n, p, _ in self._remote_seen}),
                          "devices": sorted({d for _, _, d in self._remote_seen})}
        return out

    # ---- internals ---------------------------------------------------------------------------

    def _encoder(self, ref: ModelRef) -> Encoder:
        return load_encoder(ref, device=self.device, api_key_env=self.api_key_env)

    def _dim(self, ref: ModelRef) -> int:
        mid = ref.model_id
        if mid not in self._dims:
            # only when every text so far was blank: ask the model its width
            enc = self._encoder(ref)
            self._dims[mid] = enc.dim or enc.encode(["dimension probe"]).shape[1]
        return self._dims[mid]

    def _ensure(self, ref: ModelRef, texts: Iterable[str], bulk: bool = False) -> None:
        mid = ref.model_id
        if mid in self._failed:
            return
        vecs = self._vectors.setdefault(mid, {})
        todo = [t for t in dict.fromkeys(texts) if t not in vecs and not is_blank(t)]
        if not todo:
            return
        hashes = [text_hash(t) for t in todo]
        rest: list[tuple[str, str]] = []
        if self.store is not None:
            found = self.store.get_embeddings(mid, hashes)
            for t, h in zip(todo, hashes, strict=True):
                blob = found.get(h)
                if blob is None:
                    rest.append((t, h))
                else:
                    vecs[t] = np.frombuffer(blob, dtype="<f4")
                    self._dims.setdefault(mid, vecs[t].shape[0])
            self._cached[mid] += len(todo) - len(rest)
        else:
            rest = list(zip(todo, hashes, strict=True))
        if not rest:
            return
        # the run's texts (flush) go to the cluster; the few a judge metric embeds while scoring
        # (questions it generated) are encoded here, and endpoints are always called from here
        if bulk and self.remote is not None and ref.backend != "openai":
            self._embed_remote(ref, rest, vecs)
            return
        try:
            enc = self._encoder(ref)
        except ModelUnavailableError as exc:
            self._failed[mid] = exc
            return
        self._embed(ref, enc, rest, vecs)

    def _embed(self, ref: ModelRef, enc: Encoder, rest: list[tuple[str, str]],
               vecs: dict[str, np.ndarray]) -> None:
        mid = ref.model_id
        rest.sort(key=lambda th: len(th[0]), reverse=True)
        advance = self.progress(f"embedding ({_short(mid)})", len(rest))
        local = ref.backend != "openai"  # padding and batch shape matter for local models only
        size = self.batch_size or getattr(enc, "batch_size", None) or DEFAULT_BATCH_SIZE
        for part in plan_calls(rest, size, BLOCK_BATCHES, min_ratio=0.5 if local else 0.0):
            t0 = time.perf_counter()
            try:
                x = enc.encode([t for t, _ in part], batch_size=size)
            except Exception as exc:  # noqa: BLE001 - a failing endpoint must not lose the run
                self._failed[mid] = EmbeddingError(
                    f"embedding with {mid} failed after {self._computed[mid]} texts: "
                    f"{type(exc).__name__}: {exc}")
                return
            self._encode_s += time.perf_counter() - t0
            if x.shape[0] != len(part):
                raise EmbeddingError(f"encoder {mid} returned {x.shape[0]} rows for {len(part)} texts")
            self._dims.setdefault(mid, x.shape[1])
            for (t, _), row in zip(part, x, strict=True):
                vecs[t] = row
            if self.store is not None:
                self.store.put_embeddings(mid, {h: x[i].astype("<f4", copy=False).tobytes()
                                                for i, (_, h) in enumerate(part)}, dim=x.shape[1])
            self._computed[mid] += len(part)
            advance(len(part))

    def _embed_remote(self, ref: ModelRef, rest: list[tuple[str, str]], vecs: dict[str, np.ndarray]) -> None:
        """:meth:`_embed` on the cluster (:attr:`remote`): the same calls, each text encoded once by
        one worker; vectors written to the store's cache as calls finish, and kept here only without
        a store (the workers scoring the run read them from the cache)."""
        assert self.remote is not None
        mid = ref.model_id
        rest.sort(key=lambda th: len(th[0]), reverse=True)
        advance = self.progress(f"embedding on Ray ({_short(mid)})", len(rest))
        size = self.batch_size or DEFAULT_BATCH_SIZE
        t0 = time.perf_counter()
        try:
            for part, x, where in self.remote(ref, rest, batch_size=size, batches_per_call=BLOCK_BATCHES,
                                              device=self.device):
                if x.shape[0] != len(part):
                    raise EmbeddingError(f"encoder {mid} returned {x.shape[0]} rows for {len(part)} texts")
                self._dims.setdefault(mid, x.shape[1])
                if self.store is not None:
                    self.store.put_embeddings(mid, {h: x[i].astype("<f4", copy=False).tobytes()
                                                    for i, (_, h) in enumerate(part)}, dim=x.shape[1])
                else:
                    for (t, _), row in zip(part, x, strict=True):
                        vecs[t] = row
                self._computed[mid] += len(part)
                self._remote_seen[(str(where.get("node")), str(where.get("pid")), str(where.get("device")))] += len(part)
                advance(len(part))
        except EmbeddingError:
            raise
        except Exception as exc:  # noqa: BLE001 - a worker that cannot load or run the model: no value, with why
            cause = getattr(exc, "cause", None) or exc
            self._failed[mid] = (cause if isinstance(cause, ModelUnavailableError) else EmbeddingError(
                f"embedding with {mid} on Ray failed after {self._computed[mid]} texts: "
                f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"))
        finally:
            self._encode_s += time.perf_counter() - t0


def plan_calls(items: list[tuple[str, str]], batch_size: int, batches_per_call: int, *,
               min_ratio: float = 0.5) -> list[list[tuple[str, str]]]:
    """Group ``items`` (``(text, hash)``, longest text first) into encoder calls.

    A batch is padded to its longest text, so a batch holding the last passages and the first
    short answers would cost as much as a batch of passages: a batch is closed early when the
    next text is shorter than ``min_ratio`` times the batch's first (longest) text. A call holds
    up to ``batches_per_call`` batches, all full but the last, so an encoder that sorts by length
    and cuts ``batch_size`` pieces inside a call (as sentence-transformers does) forms exactly
    these batches. Calls are the units of progress and of writes to the cache.
    """
    calls: list[list[tuple[str, str]]] = []
    call: list[tuple[str, str]] = []
    count = 0
    i, n = 0, len(items)
    while i < n:
        first = len(items[i][0])
        j = i + 1
        while j < n and j - i < batch_size and len(items[j][0]) >= min_ratio * first:
            j += 1
        call.extend(items[i:j])
        count += 1
        if j - i < batch_size or count >= batches_per_call:
            calls.append(call)
            call, count = [], 0
        i = j
    if call:
        calls.append(call)
    return calls


def _mapping_option(value: Any, name: str) -> dict[str, Any] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"option {name} must be a JSON object like "
                              f"'{{\"sentence-transformers/bert-base-nli-mean-tokens\": \"/models/bert\"}}': {exc}") from exc
    if not isinstance(value, Mapping):
        raise ConfigError(f"option {name} must map model names to folders, got {type(value).__name__}")
    return dict(value)


def _short(model_id: str) -> str:
    return model_id.rsplit("/", 1)[-1]
