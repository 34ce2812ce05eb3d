"""The :class:`Engine` protocol: where a metric's batches are computed.

An engine takes one metric's plan (:class:`~ragmeter.run.plan.MetricPlan`) and yields its scores
batch by batch (:class:`Batch`), as they are computed, so the runner stores each batch at once and
an interrupted run keeps what it computed. Three engines implement it:
:class:`~ragmeter.run.engines.local.LocalEngine` (this process), :class:`~ragmeter.run.engines.forked.WorkerEngine` (a second process scoring its share of
each pure metric's samples) and :class:`~ragmeter.run.engines.ray_engine.RayEngine` (blocks of
samples on a Ray runtime). Every engine calls the metric on the same batches through
:func:`~ragmeter.run.engines.checks.run_metric`, so values do not depend on the engine.

The protocol is everything the runner asks of an engine, in the order it asks: :meth:`~Engine.start`
(work started ahead, before the run's samples are stored), :meth:`~Engine.attach` (the run's
services), :meth:`~Engine.run_together` (several pure metrics at once, where the engine can),
:meth:`~Engine.run` (one metric), :meth:`~Engine.wait` (work started ahead), :meth:`~Engine.close`.
Where a step does not apply to an engine, its method does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from ragmeter.core.schema import Sample, ScoreColumn

if TYPE_CHECKING:
    from ragmeter.run.plan import MetricPlan, Started


class Batch(NamedTuple):
    """Scores of a batch of samples, in the samples' order."""

    samples: list[Sample]
    scores: ScoreColumn


#: ``(block of samples, one score column per plan)``: what :meth:`Engine.run_together` yields
Block = tuple[list[Sample], list[ScoreColumn]]


@runtime_checkable
class Engine(Protocol):
    """Computes a metric's scores (see the module docstring)."""

    name: str

    def start(self, plans: list[MetricPlan], n_samples: int, options: dict[str, Any]) -> Started:
        """The run's plans, with any work this engine starts ahead (the local engine's second
        process on the tail of each pure metric's samples, while this process stores the run)."""
        ...

    def attach(self, ctx: Any) -> None:
        """Make the run's scoring context send its services' heavy work (embeddings, judge calls)
        where this engine computes (Ray: the cluster)."""
        ...

    def run(self, plan: MetricPlan, ctx: Any) -> Iterator[Batch]:
        """Score ``plan.eligible`` with ``plan.request``; yield each batch's scores as it is done."""
        ...

    def run_together(self, plans: Sequence[MetricPlan], ctx: Any) -> Iterator[Block] | None:
        """Score several pure metrics whose plans have the same eligible samples in one pass (each
        block shipped once for all of them), yielding blocks as they finish; ``None`` when this
        engine scores metric by metric (the runner then calls :meth:`run` for each)."""
        ...

    def wait(self) -> None:
        """Wait until the scores of work started ahead (:meth:`start`) are in; re-raise its error."""
        ...

    def close(self) -> None:
        """Release what the engine holds (processes, pipes); scores not yet yielded are dropped."""
        ...
