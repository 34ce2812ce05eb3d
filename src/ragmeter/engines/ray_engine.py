"""The Ray engine: a metric's samples split into blocks, each block scored by a Ray task.

The driver keeps the plan and the store: it runs every metric's ``prepare`` (so embeddings are
computed once, into the store's embedding cache) and writes each block's scores to the store as
the block finishes (``ray.wait``), so an interrupted run resumes exactly as with the local engine.
Workers rebuild a :class:`~ragmeter.context.ScoringContext` from the run options and the store URL
(they read cached embeddings from it) and call the metric on the same batches the local engine
would, so values are identical. LLM-judged metrics are not sent to workers: the runner scores them
on the driver, through its one judge service (one rate limiter, one cache).

``ray.init()`` starts a local runtime by default; ``address="ray://HOST:10001"`` (``--ray-address``)
joins a cluster.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ragmeter.errors import ConfigError

BLOCKS_PER_CPU = 4


def init(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Start (or join) a Ray runtime once per process; return the ``ray`` module.

    Args:
        address: ``ray://HOST:PORT`` of a cluster, or ``None`` for a local runtime.
        num_cpus: CPUs of a local runtime (default: ``RAGMETER_RAY_NUM_CPUS`` or all).

    Raises:
        ConfigError: Ray is not installed, or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--engine ray needs Ray: pip install 'ragmeter-eval[ray]'") from exc
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "ignore_reinit_error": True}
        if address:
            kwargs["address"] = address
        else:
            env = os.environ.get("RAGMETER_RAY_NUM_CPUS")
            n = num_cpus or (int(env) if env else None)
            if n:
                kwargs["num_cpus"] = n
            kwargs["runtime_env"] = {"env_vars": {k: os.environ[k] for k in ("PYTHONPATH", "HF_HUB_OFFLINE")
                                                  if k in os.environ}}
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from None
    return ray


def _score_block(request: Any, chunks: Sequence[Sequence[Any]], options: dict[str, Any], store_url: str | None,
                 run_metric: Callable[..., list[Any]]) -> list[list[Any]]:
    """One Ray task: score a block (a list of batches) with a fresh context; return the scores per batch."""
    from ragmeter.context import ScoringContext
    from ragmeter.store import open_store

    store = open_store(store_url) if store_url else None
    ctx = ScoringContext(options, store=store)
    try:
        return [run_metric(request, list(chunk), ctx) for chunk in chunks]
    finally:
        ctx.close()


def score_blocks(request: Any, samples: Sequence[Any], batch_size: int, options: dict[str, Any],
                 store_url: str | None, run_metric: Callable[..., list[Any]], *,
                 address: str | None = None) -> Iterator[tuple[list[Any], list[Any]]]:
    """Score ``samples`` with one metric on Ray; yield ``(batch, scores)`` as blocks finish.

    Args:
        request: the resolved metric request (its function runs on the workers).
        samples: the samples to score (the runner already removed ineligible ones).
        batch_size: the metric's batch size; blocks are whole batches, so values equal the local engine's.
        options: run options (rebuilt into a scoring context on every worker).
        store_url: the store's URL (workers read cached embeddings from it); ``None`` for none.
        run_metric: the runner's checked call of a metric on one batch.
        address: ``ray://`` address of a cluster, or ``None`` for a local runtime.
    """
    ray = init(address)
    batches = [list(samples[i:i + batch_size]) for i in range(0, len(samples), batch_size)]
    if not batches:
        return
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    per_block = max(1, math.ceil(len(batches) / (cpus * BLOCKS_PER_CPU)))
    remote = ray.remote(_score_block)
    req_ref = ray.put(request)
    pending: dict[Any, list[list[Any]]] = {}
    for i in range(0, len(batches), per_block):
        block = batches[i:i + per_block]
        pending[remote.remote(req_ref, block, options, store_url, run_metric)] = block
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            block = pending.pop(ref)
            yield from zip(block, ray.get(ref), strict=True)
