"""Quality in production and over time.

- :func:`evaluate_window` scores a random sample of the calls logged in a time window with any
  metrics (offline ones, or judge metrics under the judge's budget cap) and stores the result as
  an ordinary run linked to its window, so production quality has intervals like any run.
- :func:`trend` follows one metric across stored runs (oldest first) with each run's interval,
  git commit and version, and marks a regression where the paired regression gate between two
  consecutive runs that share samples would fail.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Chunk, Sample
from ragmeter.monitor.agents import FIGURES_KEY, read_traces
from ragmeter.store.records import MetricSummary

KV_NAMESPACE = "monitor_runs"


def evaluate_window(store: Any, window: timedelta, metrics: list[str], *, sample: float = 1.0,
                    max_calls: int | None = None, seed: int | None = 0, until: datetime | None = None,
                    options: dict[str, Any] | None = None, name: str | None = None,
                    progress: bool = False, skip_unavailable: bool = False,
                    engine: str = "local", ray_address: str | None = None) -> Any:
    """Score a random share ``sample`` of the calls in ``[until - window, until)``.

    Calls with an error, or without a query or an answer, are not scored (they are counted in
    the run's ``extra["monitor"]`` record), except the agent traces (:mod:`ragmeter.monitor.agents`):
    each is scored with its stored trace, so the agent metrics (tool choice, trajectory, the
    trajectory judge) score production traces too. ``engine="ray"`` scores the non-judge metrics in
    blocks on a Ray runtime (``ray_address``: a cluster's ``ray://HOST:10001``), with the same
    values; judge metrics stay on this machine. Returns the :class:`EvaluationResult`.

    Raises:
        ConfigError: ``sample`` outside (0, 1], no metrics, an unknown engine, or no scorable
            call in the window.
    """
    from sqlalchemy import select

    from ragmeter.monitor.aggregate import now_utc
    from ragmeter.run.engines import check_engine
    from ragmeter.run.runner import evaluate
    from ragmeter.store.models import CallRow

    check_engine(engine)
    if not 0 < sample <= 1:
        raise ConfigError(f"--sample must be in (0, 1], got {sample}")
    if not metrics:
        raise ConfigError("give the metrics to score, e.g. --metrics faithfulness,answer_relevancy")
    until = until or now_utc()
    since = until - window
    with store.session() as s:
        rows = s.execute(select(CallRow.pk, CallRow.call_id, CallRow.query, CallRow.answer,
                                CallRow.contexts, CallRow.error, CallRow.ts, CallRow.meta)
                         .where(CallRow.ts >= since, CallRow.ts < until).order_by(CallRow.ts)).all()
    n_window = len(rows)
    # an agent's trace is scored even when one of its steps failed (the agent metrics read the failure)
    usable = [r for r in rows if (not r.error and r.query and r.answer) or _has_agent_trace(r.meta)]
    rng = random.Random(seed)
    picked = [r for r in usable if rng.random() < sample] if sample < 1 else list(usable)
    if max_calls is not None and len(picked) > max_calls:
        picked = rng.sample(picked, max_calls)
        picked.sort(key=lambda r: r.ts)
    if not picked:
        raise ConfigError(f"no call to score between {since:%Y-%m-%d %H:%M} and {until:%Y-%m-%d %H:%M} UTC "
                          f"({n_window} logged, {len(usable)} with a query, an answer and no error, or an agent trace)")
    traces = read_traces(store, [r.call_id for r in picked if _has_agent_trace(r.meta)])
    data = [Sample(id=r.call_id or f"call-{r.pk}", question=r.query, answer=r.answer,
                   contexts=[Chunk(text=t) for t in _context_texts(r.contexts)], trace=traces.get(r.call_id or ""))
            for r in picked]
    record = {"start": since.isoformat() + "Z", "end": until.isoformat() + "Z",
              "sample_rate": sample, "seed": seed, "n_calls": n_window, "n_usable": len(usable),
              "n_scored": len(picked), "n_agent_traces": len(traces)}
    result = evaluate(data, metrics, db=store, options=options, progress=progress,
                      skip_unavailable=skip_unavailable, engine=engine, ray_address=ray_address,
                      name=name or f"monitor {until:%Y-%m-%d %H:%M} last {_span(window)}")
    run = store.get_run(result.run_id)
    store.update_run(result.run_id, extra={**(run.extra or {}), "monitor": record})
    store.kv_put(KV_NAMESPACE, result.run_id, {**record, "metrics": list(result.summary)})
    return result


def _has_agent_trace(meta: Any) -> bool:
    return isinstance(meta, dict) and isinstance(meta.get(FIGURES_KEY), dict)


def _span(window: timedelta) -> str:
    secs = int(window.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs % size == 0:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _context_texts(contexts: Any) -> list[str]:
    out: list[str] = []
    for c in contexts or []:
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, dict) and c.get("text"):
            out.append(str(c["text"]))
    return out


def monitor_runs(store: Any) -> dict[str, dict[str, Any]]:
    """``{run_id: window record}`` of the runs made by :func:`evaluate_window`."""
    return store.kv_list(KV_NAMESPACE)


def quality_in_window(store: Any, metric: str, since: datetime, until: datetime) -> dict[str, Any] | None:
    """The newest monitor run whose window ends inside ``[since, until]`` and has ``metric``:
    ``{"run_id", "mean", "ci_low", "ci_high", "n", "direction", "window"}``."""
    best: tuple[str, dict[str, Any]] | None = None
    for run_id, rec in monitor_runs(store).items():
        end = datetime.fromisoformat(rec["end"].rstrip("Z"))
        if not since <= end <= until or metric not in rec.get("metrics", []):
            continue
        if best is None or end > datetime.fromisoformat(best[1]["end"].rstrip("Z")):
            best = (run_id, rec)
    if best is None:
        return None
    try:
        run = store.get_run(best[0])
    except Exception:  # noqa: BLE001 - the run was deleted since; skip it
        return None
    agg = store.run_summary(run).get(metric) or MetricSummary()
    return {"run_id": run.id, "mean": agg.mean, "ci_low": agg.ci_low, "ci_high": agg.ci_high, "n": agg.n,
            "direction": agg.direction, "window": best[1]}


def trend(store: Any, metric: str, *, name: str | None = None, dataset: str | None = None,
          limit: int = 50, max_drop: float = 0.0, alpha: float = 0.05) -> list[dict[str, Any]]:
    """``metric`` across the stored runs that have it, oldest first.

    Each row: run id, name, created time, mean with its 95% interval, n, git commit, ragmeter
    version, dataset fingerprint, and ``regression``: ``True`` where the paired regression gate
    (one-sided permutation test, drop > ``max_drop`` and p < ``alpha``) fails against the previous
    run on the samples both scored; ``None`` when the two runs share no sample.

    Args:
        name: only runs whose name starts with this.
        dataset: only runs whose dataset fingerprint starts with this.
    """
    from ragmeter.analysis.gate import gate

    runs = [(r, summary[metric]) for r in store.list_runs() if metric in (summary := store.run_summary(r))
            and (name is None or (r.name or "").startswith(name))
            and (dataset is None or (r.dataset_fingerprint or "").startswith(dataset))]
    if not runs:
        raise ConfigError(f"no stored run has metric {metric!r}"
                          + (f" (name {name!r})" if name else "") + " (see `ragmeter runs`)")
    runs = list(reversed(runs))[-limit:]
    out: list[dict[str, Any]] = []
    prev = None
    for r, agg in runs:
        prov = (r.config or {}).get("provenance") or {}
        row = {"run_id": r.id, "name": r.name, "created_at": r.created_at.isoformat(),
               "mean": agg.mean, "ci_low": agg.ci_low, "ci_high": agg.ci_high, "n": agg.n,
               "direction": agg.direction,
               "git_commit": prov.get("git_commit"), "version": r.ragmeter_version,
               "dataset": r.dataset_fingerprint, "regression": None, "pvalue": None}
        if prev is not None:
            try:
                res = gate(r.id, prev.id, max_drop=max_drop, metrics=[metric], alpha=alpha,
                           store=store, n_resamples=2000)
                g = res.rows[0]
                if g.n > 0:
                    row["regression"] = bool(g.regressed)
                    row["pvalue"] = g.pvalue
            except ConfigError:
                row["regression"] = None
        out.append(row)
        prev = r
    return out
