"""The local engine: a metric's batches in this process, one after the other; on a large run, a second
process started ahead takes the tail of each pure metric's samples (:mod:`ragmeter.run.engines.forked`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ragmeter.run.engines.base import Batch
from ragmeter.run.engines.checks import run_metric

if TYPE_CHECKING:
    from ragmeter.run.plan import MetricPlan, Started


class LocalEngine:
    """This process: the metric's batches (``spec.batch_size`` samples) one after the other; its
    :meth:`start` starts the second process (:mod:`ragmeter.run.engines.forked`) on a large run."""

    name = "local"

    def start(self, plans: list[MetricPlan], n_samples: int, options: dict[str, Any]) -> Started:
        from ragmeter.run.engines.forked import start

        return start(plans, n_samples, options)

    def attach(self, ctx: Any) -> None:
        """Nothing: the services run in this process."""

    def run(self, plan: MetricPlan, ctx: Any) -> Iterator[Batch]:
        req, eligible = plan.request, plan.eligible
        bs = max(1, req.spec.batch_size)
        for i in range(0, len(eligible), bs):
            chunk = eligible[i:i + bs]
            yield Batch(chunk, run_metric(req, chunk, ctx))

    def run_together(self, plans: Sequence[MetricPlan], ctx: Any) -> None:
        """``None``: this process scores metric by metric (its second process takes a share of each)."""
        return None

    def wait(self) -> None:
        """Nothing: scores are computed in :meth:`run`."""

    def close(self) -> None:
        """Nothing to release."""
