"""What the report and the dashboard show of one run, of one sample and of runs side by side, as
JSON-able dicts gathered from the store (the one-file report renders them, the dashboard's API returns
them).

Presentation reads only from the store: a run's config, its summary (the typed record,
:meth:`ragmeter.store.Store.run_summary`) and extra records, its samples as they were evaluated and
their scores. Nothing here writes to the store. The parts live by concept: a run's metrics
(:mod:`~ragmeter.apps.report.metric_views`), its samples (:mod:`~ragmeter.apps.report.samples`),
the sections other features add (:mod:`~ragmeter.apps.report.sections`), runs side by side
(:mod:`~ragmeter.apps.report.differences`), and large runs read as score columns
(:mod:`~ragmeter.apps.report.columnar`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmeter.apps.report import columnar
from ragmeter.apps.report.arena import arena_view
from ragmeter.apps.report.columnar import LARGE_RUN
from ragmeter.apps.report.conversations import conversations_for
from ragmeter.apps.report.differences import compare_rows
from ragmeter.apps.report.meta_eval import meta_eval_view
from ragmeter.apps.report.metric_views import dataset_summary, is_live, metric_views, run_header
from ragmeter.apps.report.panel import panel_view
from ragmeter.apps.report.samples import sample_detail, sample_row, sort_rows
from ragmeter.apps.report.sections import (
    calibration_of,
    composites_for,
    grids_for,
    hints_for,
    jsonable,
    reliability_for,
    run_settings,
)
from ragmeter.apps.report.traces import traces_for
from ragmeter.core.errors import StoreError
from ragmeter.store import Store
from ragmeter.store.models import Run


def run_view(store: Store, ref: str, *, max_samples: int | None = 1000,
             with_details: bool = False) -> dict[str, Any]:
    """Everything the report shows about one run.

    Args:
        store: the results store.
        ref: a run id, unique prefix, name or ``latest``.
        max_samples: at most this many sample rows (the worst ones); ``None`` for all.
        with_details: attach each row's full detail (contexts, verdicts) for the one-file report.

    Raises:
        StoreError: no such run.
    """
    run = store.get_run(ref)
    summary = store.run_summary(run)
    live = is_live(run, summary)
    note = None
    if run.n_samples > LARGE_RUN:  # from the score columns; rows only for the samples shown
        metrics, rows, total, dataset, note = columnar.run_parts(store, run, summary, live, max_samples,
                                                                 with_details)
    else:
        samples = store.run_samples(run.id)
        table = store.score_table(run.id)
        metrics = metric_views(run, summary, samples, table, live)
        rows = sort_rows([sample_row(s, i, table, metrics) for i, s in enumerate(samples)])
        total = len(rows)
        if max_samples is not None:
            rows = rows[:max_samples]
        if with_details:
            for r in rows:
                r["detail"] = sample_detail(samples[r["position"]], table, metrics)
        dataset = dataset_summary(run, samples)
    return {
        "run": run_header(run),
        "live": live,
        **run_settings(run),
        "dataset": dataset,
        "metrics": metrics,
        "samples": rows,
        "samples_total": total,
        "samples_note": note,
        "calibration": calibration_of(run),
        "grids": grids_for(store, run.id),
        "composites": composites_for(store, run),
        "hints": jsonable(hints_for(metrics)),
        "reliability": reliability_for(store, run.id),
        "meta_eval": meta_eval_view(store, run),
        "arena": arena_view(run),
        "panel": panel_view(run),
        "conversations": conversations_for(store, run.id),
        "traces": traces_for(store, run.id),
    }


def sample_view(store: Store, ref: str, sample_id: str) -> dict[str, Any]:
    """One sample of a run with its contexts and every metric's verdict.

    Raises:
        StoreError: no such run, or the run has no sample with this id.
    """
    run = store.get_run(ref)
    samples = store.run_samples(run.id)
    pos = next((i for i, s in enumerate(samples) if s.id == sample_id), None)
    if pos is None:
        raise StoreError(f"run {run.id} has no sample {sample_id!r}")
    table = store.score_table(run.id)
    metas = metric_views(run, store.run_summary(run), [samples[pos]], table, live=True)
    # bands and directions come from the run's own metrics; aggregates here are per-sample only
    detail = sample_detail(samples[pos], table, metas)
    return {"run": run_header(run), "position": pos, "n_samples": len(samples),
            "prev_id": samples[pos - 1].id if pos > 0 else None,
            "next_id": samples[pos + 1].id if pos + 1 < len(samples) else None, **detail}


def compare_view(store: Store, refs: Sequence[str], *, max_samples: int | None = 1000
                 ) -> dict[str, Any]:
    """Several runs side by side: per-metric means with CIs, and every run's paired difference
    to the first run (the baseline), per metric; plus the samples that changed most.

    Raises:
        StoreError: a run does not exist, or fewer than two distinct runs were given.
    """
    runs: list[Run] = []
    for ref in refs:
        r = store.get_run(ref)
        if all(r.id != x.id for x in runs):
            runs.append(r)
    if len(runs) < 2:
        raise StoreError("comparing needs at least two distinct runs")
    if max(r.n_samples for r in runs) > LARGE_RUN:  # in bulk from the score columns
        return columnar.compare_view(store, runs, max_samples)
    return compare_rows(store, runs, max_samples)
