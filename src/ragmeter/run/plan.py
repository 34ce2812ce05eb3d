"""The plan of a run: per metric, which samples it scores, which lack a field it needs (and which
field), and why it cannot run here, if it cannot. Typed records, not tuples read by position."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ragmeter.core.schema import Sample
from ragmeter.metrics.registry import MetricRequest, missing_fields, scored_samples
from ragmeter.run.spans import is_span_run, rows_for


@dataclass(slots=True)
class MetricPlan:
    """What one metric of a run does.

    Attributes:
        request: the resolved metric (spec, parameters, the key its scores are stored under).
        eligible: the samples it scores, in dataset order.
        lacking: the samples it cannot score, each with why (``"missing field: reference"``):
            they are stored as "no value" with that reason.
        unavailable: why the metric cannot run here (no judge configured ...), or ``None``.
    """

    request: MetricRequest
    eligible: list[Sample]
    lacking: list[tuple[Sample, str]]
    unavailable: str | None = None

    @property
    def key(self) -> str:
        return self.request.key

    @property
    def needs_llm(self) -> bool:
        return bool(self.request.spec.needs_llm)

    @property
    def pure(self) -> bool:
        """Whether another process may score it (:meth:`~ragmeter.metrics.registry.MetricSpec.is_pure`)."""
        return self.request.spec.is_pure(self.request.params)


class Split(NamedTuple):
    """A metric's eligible samples cut in two: ``here`` this process scores, ``worker`` the
    second process (:mod:`ragmeter.run.engines.forked`)."""

    here: list[Sample]
    worker: list[Sample]


@dataclass(slots=True)
class Started:
    """A local run's plans and the second process already scoring its share (started before the
    run's samples are stored). ``worker`` is ``None`` when the run has no second process."""

    plans: list[MetricPlan]
    splits: dict[str, Split]
    worker: Any = None

    def cancel(self) -> None:
        """Stop the second process, if any (the run failed before its scores were collected)."""
        if self.worker is not None:
            self.worker.close()


def make_plans(samples: list[Sample], requests: list[MetricRequest], done: Collection[tuple[str, str]],
               unavailable_by_key: Mapping[str, str]) -> list[MetricPlan]:
    """One :class:`MetricPlan` per metric that has anything left to store (``done``: the
    ``(sample id, metric key)`` pairs a resumed run already stored). A metric scores the samples
    of its scope (:func:`~ragmeter.metrics.registry.scored_samples`), in a per-span run the rows of
    its span kinds (:func:`ragmeter.run.spans.rows_for`)."""
    plans: list[MetricPlan] = []
    # metrics that need the same fields (and score the same samples)
    lacks: dict[tuple[tuple[str, ...], str], tuple[list[Sample], dict[int, str]]] = {}
    everything = samples
    pools: dict[str, list[Sample]] = {}
    span_run = is_span_run(everything)
    for req in requests:
        # a per-span run (ragmeter.run.spans): the rows of the span kinds the metric names
        kind = (req.spec.scope or "") + ("|" + ",".join(req.spec.span_kinds or ()) if span_run else "")
        if kind not in pools:
            pool = scored_samples(req.spec.scope or "", everything)
            pools[kind] = rows_for(req.spec.span_kinds or (), pool) if span_run else pool
        samples = pools[kind]
        need = tuple(req.spec.requires)
        if (need, kind) not in lacks:
            why = {}
            for i, s in enumerate(samples):
                miss = missing_fields(s, need)
                if miss:
                    why[i] = "missing field: " + ", ".join(miss)
            lacks[need, kind] = ([s for i, s in enumerate(samples) if i not in why] if why else samples, why)
        ok, why = lacks[need, kind]
        if done:
            ok = [s for s in ok if (s.id, req.key) not in done]
            lacking = [(samples[i], r) for i, r in why.items() if (samples[i].id, req.key) not in done]
        else:
            lacking = [(samples[i], r) for i, r in why.items()]
        if not ok and not lacking:
            continue
        plans.append(MetricPlan(req, ok, lacking, unavailable_by_key.get(req.key)))
    return plans
