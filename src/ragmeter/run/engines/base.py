"""The :class:`Engine` protocol: where a metric's batches are computed.

An engine takes one metric's plan (:class:`~ragmeter.run.plan.MetricPlan`) and yields its scores
batch by batch (:class:`Batch`), as they are computed, so the runner stores each batch at once and
an interrupted run keeps what it computed. Three engines implement it: :class:`LocalEngine` (this
process), :class:`~ragmeter.run.engines.forked.WorkerEngine` (a second process scoring its share of
each pure metric's samples) and :class:`~ragmeter.run.engines.ray_engine.RayEngine` (blocks of
samples on a Ray runtime). Every engine calls the metric on the same batches through
:func:`~ragmeter.run.engines.checks.run_metric`, so values do not depend on the engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from ragmeter.core.schema import Sample, ScoreColumn
from ragmeter.run.engines.checks import run_metric

if TYPE_CHECKING:
    from ragmeter.run.plan import MetricPlan


class Batch(NamedTuple):
    """Scores of a batch of samples, in the samples' order."""

    samples: list[Sample]
    scores: ScoreColumn


@runtime_checkable
class Engine(Protocol):
    """Computes a metric's scores (see the module docstring)."""

    name: str

    def run(self, plan: MetricPlan, ctx: Any) -> Iterator[Batch]:
        """Score ``plan.eligible`` with ``plan.request``; yield each batch's scores as it is done."""
        ...

    def close(self) -> None:
        """Release what the engine holds (processes, pipes); scores not yet yielded are dropped."""
        ...


class LocalEngine:
    """This process: the metric's batches (``spec.batch_size`` samples) one after the other."""

    name = "local"

    def run(self, plan: MetricPlan, ctx: Any) -> Iterator[Batch]:
        req, eligible = plan.request, plan.eligible
        bs = max(1, req.spec.batch_size)
        for i in range(0, len(eligible), bs):
            chunk = eligible[i:i + bs]
            yield Batch(chunk, run_metric(req, chunk, ctx))

    def close(self) -> None:
        """Nothing to release."""
