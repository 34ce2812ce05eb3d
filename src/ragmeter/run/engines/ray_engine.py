"""The Ray engine: a metric's samples split into blocks, each block scored by a Ray task.

The driver keeps the plan and the store: it runs every metric's ``prepare`` (so embeddings are
computed once, into the store's embedding cache) and writes each block's scores to the store as
the block finishes (``ray.wait``), so an interrupted run resumes exactly as with the local engine.
Workers rebuild a :class:`~ragmeter.core.context.ScoringContext` from the run options and the store URL
(they read cached embeddings from it) and call the metric on the same batches the local engine
would, so values are identical. LLM-judged metrics are not sent to workers: the runner scores them
on the driver, through its one judge service (one rate limiter, one cache).

``ray.init()`` starts a local runtime by default; ``address="ray://HOST:10001"`` (``--ray-address``)
joins a cluster.

Workers get the environment they need to score as the driver does
(:mod:`ragmeter.run.engines.ray_runtime`); the store URL (which may carry a password) reaches them
only as a task argument, put once in the object store, which Ray does not log.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ragmeter.run.engines.ray_runtime import init

BLOCKS_PER_CPU = 4


def _score_block(request: Any, chunks: Sequence[Sequence[Any]], options: dict[str, Any], store_url: str | None,
                 run_metric: Callable[..., list[Any]]) -> list[list[Any]]:
    """One Ray task: score a block (a list of batches) with a fresh context; return the scores per batch."""
    from ragmeter.core.context import ScoringContext
    from ragmeter.store import open_store

    # only metrics that read cached embeddings need the store; opening it costs a connection per task
    store = open_store(store_url) if store_url and getattr(request.spec, "needs_embeddings", True) else None
    ctx = ScoringContext(options, store=store)
    try:
        return [run_metric(request, list(chunk), ctx) for chunk in chunks]
    finally:
        ctx.close()


_SHIPPED: list[Any] = []  # (key, samples, [(block, ref)]) of the last column sent to the object store


def _blocks(ray: Any, samples: Sequence[Any], batches: list[list[Any]],
            per_block: int) -> list[tuple[list[list[Any]], Any]]:
    """Blocks of batches and their object-store references. The metrics of a run usually score the
    same samples in the same batches: the column is put into the object store once and its
    references reused, instead of pickling every sample again for every metric."""
    key = (len(samples), len(batches), per_block, tuple(id(s) for s in samples[:1]), id(samples[-1]))
    if _SHIPPED and _SHIPPED[0][0] == key and all(a is b for a, b in zip(_SHIPPED[0][1], samples, strict=True)):
        return _SHIPPED[0][2]
    out = [(batches[i:i + per_block], ray.put(batches[i:i + per_block]))
           for i in range(0, len(batches), per_block)]
    _SHIPPED[:] = [(key, list(samples), out)]
    return out


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
    # put once, passed by reference: the URL (maybe with a password) is never inlined in a task spec
    req_ref, opts_ref, url_ref = ray.put(request), ray.put(options), ray.put(store_url)
    pending: dict[Any, list[list[Any]]] = {}
    for block, block_ref in _blocks(ray, samples, batches, per_block):
        pending[remote.remote(req_ref, block_ref, opts_ref, url_ref, run_metric)] = block
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            block = pending.pop(ref)
            yield from zip(block, ray.get(ref), strict=True)


def _score_block_all(requests: Sequence[Any], samples: Sequence[Any], options: dict[str, Any],
                     run_metric: Callable[..., list[Any]]) -> list[list[Any]]:
    """One Ray task: every metric of ``requests`` on one block of samples (unpickled once for all of
    them); the scores per metric, in sample order."""
    from ragmeter.core.context import ScoringContext
    from ragmeter.core.schema import ScoreColumn

    ctx = ScoringContext(options)
    try:
        out = []
        for req in requests:
            bs = max(1, req.spec.batch_size)
            parts = [run_metric(req, list(samples[i:i + bs]), ctx) for i in range(0, len(samples), bs)]
            out.append(ScoreColumn.concat([ScoreColumn.of(p) for p in parts]))
        return out
    finally:
        ctx.close()


def score_blocks_all(requests: Sequence[Any], samples: Sequence[Any], options: dict[str, Any],
                     run_metric: Callable[..., list[Any]], *,
                     address: str | None = None) -> Iterator[tuple[list[Any], list[list[Any]]]]:
    """Score ``samples`` with several pure metrics (values per sample, whatever the batching: see
    :mod:`ragmeter.run.engines.forked`) on Ray, one task per block for all of them, so each block is
    shipped and unpickled once instead of once per metric. Yields ``(block, scores per metric)`` as
    blocks finish."""
    ray = init(address)
    if not samples:
        return
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = max(1, math.ceil(len(samples) / (cpus * BLOCKS_PER_CPU)))
    remote = ray.remote(_score_block_all)
    req_ref, opts_ref = ray.put(list(requests)), ray.put(options)
    pending: dict[Any, list[Any]] = {}
    for i in range(0, len(samples), size):
        block = list(samples[i:i + size])
        pending[remote.remote(req_ref, ray.put(block), opts_ref, run_metric)] = block
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            yield pending.pop(ref), ray.get(ref)


class RayEngine:
    """Ray as an :class:`~ragmeter.run.engines.base.Engine`: a metric's batches in blocks, one Ray
    task per block (:func:`score_blocks`); :meth:`run_together` scores several pure metrics on the
    same samples in one task per block (:func:`score_blocks_all`).

    Args:
        address: ``ray://HOST:PORT`` of a cluster, or ``None`` for a local runtime (started here).
        store_url: the store's URL (workers read cached embeddings from it).
    """

    name = "ray"

    def __init__(self, address: str | None = None, store_url: str | None = None) -> None:
        init(address)
        self.address = address
        self.store_url = store_url

    def run(self, plan: Any, ctx: Any) -> Iterator[Any]:
        from ragmeter.run.engines.base import Batch
        from ragmeter.run.engines.checks import run_metric

        bs = max(1, plan.request.spec.batch_size)
        for chunk, scores in score_blocks(plan.request, plan.eligible, bs, dict(ctx.options), self.store_url,
                                          run_metric, address=self.address):
            yield Batch(list(chunk), scores)

    def start(self, plans: list[Any], n_samples: int, options: dict[str, Any]) -> Any:
        """The plans as they are: nothing starts before the run's samples are stored."""
        from ragmeter.run.plan import Started

        return Started(plans, {})

    def attach(self, ctx: Any) -> None:
        """The run's embeddings are encoded on the cluster (:func:`ragmeter.run.engines.ray_embed.encode_on_ray`)
        and its judge calls sent from Ray workers (:mod:`ragmeter.run.engines.ray_judge`: the judge
        service is created from a context with ``engine`` set)."""
        import functools

        from ragmeter.run.engines.ray_embed import encode_on_ray
        from ragmeter.run.engines.ray_judge import service_for

        ctx.engine = ("ray", self.address)
        ctx.remote_embed = functools.partial(encode_on_ray, address=self.address)
        ctx.remote_judge = service_for(self.address)

    def run_together(self, plans: Sequence[Any], ctx: Any) -> Iterator[tuple[list[Any], list[Any]]]:
        """Every plan of ``plans`` (pure metrics, the same eligible samples) on Ray at once: yields
        ``(block of samples, scores per plan)`` as blocks finish."""
        from ragmeter.run.engines.checks import run_metric

        return score_blocks_all([p.request for p in plans], plans[0].eligible, dict(ctx.options), run_metric,
                                address=self.address)

    def wait(self) -> None:
        """Nothing: blocks are scored in :meth:`run` and :meth:`run_together`."""

    def close(self) -> None:
        """The Ray runtime stays up for the process's next run (``ray.shutdown`` ends it at exit)."""
