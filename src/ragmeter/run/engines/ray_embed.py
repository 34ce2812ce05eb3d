"""Embeddings on the Ray cluster: the run's distinct texts encoded by a pool of Ray actors.

With ``--engine ray`` the driver's embedding service (:mod:`ragmeter.embed.service`) still plans
the work: it deduplicates the texts every metric asked for, reads the store's embedding cache and
keeps only the texts no run has embedded yet. Those go to the cluster instead of the driver's
encoder:

- one actor per CPU of the cluster (``num_cpus=1``: Ray then gives torch one thread per actor),
  or, when the cluster has GPUs, one actor per GPU (``num_gpus=1``); never more actors than calls.
  ``num_gpus`` is asked for only when ``ray.cluster_resources()`` has GPUs and the run did not pin
  ``embedding_device`` to a CPU device;
- each actor loads the model once (the ``st`` / ``onnx`` backends, offline, as the driver would:
  :func:`ragmeter.embed.load_encoder`) and picks its device itself: ``cuda`` when Ray gave it a
  GPU, else the run's ``embedding_device`` (default: sentence-transformers' own choice);
- the texts are cut into calls exactly as the local engine cuts them
  (:func:`ragmeter.embed.service.plan_calls`: length-sorted batches of ``embedding_batch_size``,
  32 by default, the size measured fastest on CPU by ``benchmarks/embeddings.py --sweep``), so every
  batch, and therefore every vector, is the one the local engine computes. Calls hold up to 16
  batches, fewer when that keeps every actor busy; each actor has two calls queued so it never
  waits for the driver;
- every distinct text goes to exactly one actor; the driver writes each call's vectors to the
  store's embedding cache as the call finishes (a shared SQLite path or PostgreSQL), where the
  scoring tasks of :mod:`ragmeter.run.engines.ray_engine` read them.

Remote embedding endpoints (``openai:`` models) stay on the driver: they are I/O bound and their
key would have to travel to the workers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

#: calls queued per actor: one running, one waiting, so an actor never idles while the driver writes
QUEUED_PER_ACTOR = 2
#: device names that mean "no GPU wanted"
CPU_DEVICES = frozenset({"cpu", "mps"})


class EmbedWorker:
    """A Ray actor holding one loaded encoder (created by :func:`encode_on_ray`)."""

    def __init__(self, ref: Any, device: str | None) -> None:
        import os

        import ray

        from ragmeter.embed.encoders import load_encoder

        self.device = "cuda" if ray.get_gpu_ids() else device
        self.pid = os.getpid()
        self.node = ray.get_runtime_context().get_node_id()
        self.encoder = load_encoder(_worker_ref(ref), device=self.device)

    def encode(self, index: int, texts: list[str], batch_size: int) -> tuple[int, np.ndarray, dict[str, Any]]:
        x = self.encoder.encode(texts, batch_size=batch_size)
        return index, x, {"pid": self.pid, "node": self.node, "device": self.device or "default"}


def _worker_ref(ref: Any) -> Any:
    """``ref`` as this node sees it: a local folder that is not here (the bundled model installed
    at another path on a cluster node) is resolved again by name, keeping the same model id."""
    from pathlib import Path

    from ragmeter.embed.models import resolve_model

    if ref.local and not Path(ref.location).is_dir():
        here = resolve_model(ref.name, backend=ref.backend if ref.backend != "st" else None)
        if here.model_id == ref.model_id:
            return here
    return ref


def actor_plan(ray: Any, n_calls: int, device: str | None) -> tuple[int, dict[str, float]]:
    """How many encoder actors to start and the resources each asks for."""
    res = ray.cluster_resources()
    gpus = int(res.get("GPU", 0))
    if gpus and (device is None or device.split(":")[0] not in CPU_DEVICES):
        return max(1, min(gpus, n_calls)), {"num_gpus": 1, "num_cpus": 1}
    cpus = max(1, int(res.get("CPU", 1)))
    return max(1, min(cpus, n_calls)), {"num_cpus": 1}


def encode_on_ray(ref: Any, items: Sequence[tuple[str, str]], *, batch_size: int, batches_per_call: int,
                  device: str | None, address: str | None = None,
                  ) -> Iterator[tuple[list[tuple[str, str]], np.ndarray, dict[str, Any]]]:
    """Encode ``items`` (``(text, hash)``, distinct, longest first) on Ray actors; yields
    ``(part, vectors, where)`` as each call finishes (``where``: the actor's pid, node and device).

    Args:
        ref: the resolved model (:class:`ragmeter.embed.ModelRef`).
        items: the texts to embed, each once.
        batch_size: texts per forward pass.
        batches_per_call: at most this many batches per actor call.
        device: the run's ``embedding_device`` (``None``: the model library's choice).
        address: the cluster's ``ray://`` address, or ``None`` for the local runtime.
    """
    from ragmeter.embed.service import plan_calls
    from ragmeter.run.engines.ray_runtime import init

    if not items:
        return
    ray = init(address)
    min_ratio = 0.5  # as the local engine: local models pad a batch to its longest text
    n_batches = len(plan_calls(list(items), batch_size, 1, min_ratio=min_ratio))
    probe, _ = actor_plan(ray, n_batches, device)
    # fewer batches per call when that is what it takes to give every actor work
    per_call = max(1, min(batches_per_call, math.ceil(n_batches / (probe * QUEUED_PER_ACTOR))))
    parts = plan_calls(list(items), batch_size, per_call, min_ratio=min_ratio)
    n_actors, resources = actor_plan(ray, len(parts), device)
    worker = ray.remote(**resources)(EmbedWorker)
    ref_ref = ray.put(ref)
    actors = [worker.remote(ref_ref, device) for _ in range(n_actors)]
    try:
        pending: dict[Any, Any] = {}
        todo = iter(range(len(parts)))

        def submit(actor: Any) -> bool:
            i = next(todo, None)
            if i is None:
                return False
            pending[actor.encode.remote(i, [t for t, _ in parts[i]], batch_size)] = actor
            return True

        for _ in range(QUEUED_PER_ACTOR):
            for a in actors:
                submit(a)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref_done in done:
                actor = pending.pop(ref_done)
                i, x, where = ray.get(ref_done)
                submit(actor)
                yield parts[i], x, where
    finally:
        for a in actors:
            ray.kill(a)
