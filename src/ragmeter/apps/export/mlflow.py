"""MLflow sink: log a stored run to an MLflow tracking server (``MLFLOW_TRACKING_URI``).

One MLflow run per ragmeter run, tagged ``ragmeter_run_id``: exporting the same run again finds
that MLflow run and overwrites its values instead of creating another (idempotent). Logged:

- params: the run's name, dataset source and fingerprint, sample count, ragmeter version, metric
  requests and options (secrets removed by :func:`ragmeter.core.redact.redact`);
- metrics: per metric ``KEY.mean``, ``KEY.ci_low``, ``KEY.ci_high``, ``KEY.n``, ``KEY.n_missing``
  (names sanitised to MLflow's alphabet);
- artifacts: ``samples.parquet`` (one row per sample, one column per metric) and ``report.html``
  (ragmeter's one-file report; left out, with a tag saying why, when jinja2/plotly are missing).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.redact import redact
from ragmeter.store import Store

TAG = "ragmeter_run_id"
DEFAULT_EXPERIMENT = "ragmeter"
_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_name(key: str) -> str:
    """An MLflow-legal metric name for a ragmeter metric key (``ndcg@10`` -> ``ndcg_at_10``)."""
    return _BAD.sub("_", key.replace("@", "_at_"))


def mlflow_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """``{name: value}`` for every metric aggregate that has one (mean, interval, counts), read off
    the summary's JSON (a :class:`~ragmeter.store.records.RunSummary` reads as it)."""
    out: dict[str, float] = {}
    for key, agg in summary.items():
        if not isinstance(agg, Mapping):
            continue
        for field in ("mean", "ci_low", "ci_high", "n", "n_missing"):
            v = agg.get(field)
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[f"{metric_name(key)}.{field}"] = float(v)
    return out


def _params(run: Any) -> dict[str, str]:
    opts = (run.config or {}).get("options") or {}
    raw = {"ragmeter_run_name": run.name or "", "dataset_source": run.dataset_source or "",
           "dataset_fingerprint": run.dataset_fingerprint, "n_samples": str(run.n_samples),
           "ragmeter_version": run.ragmeter_version,
           "metrics": json.dumps([m.get("key") for m in run.metrics or []]),
           **{f"option.{k}": json.dumps(v, default=str) for k, v in sorted(opts.items())}}
    return {k[:250]: redact(v)[:6000] for k, v in raw.items()}


def export_mlflow(store: Store, run_id: str, *, experiment: str | None = None) -> dict[str, Any]:
    """Log a run to MLflow (see the module doc); the tracking URI comes from ``MLFLOW_TRACKING_URI``.

    Args:
        store: the results store.
        run_id: id (or prefix, name, ``latest``) of a stored run.
        experiment: MLflow experiment name (created when absent; default ``ragmeter``).

    Returns:
        ``{"mlflow_run_id", "experiment", "existing": bool, "metrics": int, "artifacts": [names]}``.

    Raises:
        ConfigError: mlflow is not installed, or the tracking server refused the request.
    """
    try:
        import mlflow  # noqa: F401
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise ConfigError("the MLflow sink needs mlflow: pip install 'ragmeter-eval[mlflow]'") from exc
    from ragmeter.apps.export.files import export_run

    rid = store.resolve_run(run_id)
    run = store.get_run(rid)
    name = experiment or DEFAULT_EXPERIMENT
    client = MlflowClient()
    try:
        exp = client.get_experiment_by_name(name)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(name)
        found = client.search_runs([exp_id], filter_string=f"tags.{TAG} = '{rid}'", max_results=1)
        existing = bool(found)
        if existing:
            mrun_id = found[0].info.run_id
        else:
            mrun_id = client.create_run(exp_id, run_name=run.name or rid, tags={TAG: rid}).info.run_id
        from mlflow.entities import Metric, Param, RunTag

        metrics = mlflow_metrics(store.run_summary(run))
        ts = int((run.finished_at or run.created_at).timestamp() * 1000)
        params = _params(run)
        if existing:  # a param cannot change value: log only the ones the first export lacked
            have = found[0].data.params
            params = {k: v for k, v in params.items() if k not in have}
        items = list(metrics.items())
        for start in range(0, max(len(items), 1), 1000):
            client.log_batch(mrun_id, metrics=[Metric(k, v, ts, 0) for k, v in items[start:start + 1000]],
                             params=[Param(k, v) for k, v in params.items()] if start == 0 else [],
                             tags=[RunTag(TAG, rid), RunTag("ragmeter_status", run.status)] if start == 0 else [])
        artifacts = []
        with tempfile.TemporaryDirectory() as tmp:
            export_run(store, rid, "parquet", Path(tmp) / "samples.parquet")
            artifacts.append("samples.parquet")
            try:
                from ragmeter.apps.report import write_report

                write_report(store, [rid], Path(tmp) / "report.html")
                artifacts.append("report.html")
            except ImportError:
                client.set_tag(mrun_id, "ragmeter_report", "not logged: pip install 'ragmeter-eval[report]'")
            for a in artifacts:
                client.log_artifact(mrun_id, str(Path(tmp) / a))
        client.set_terminated(mrun_id, "FINISHED" if run.status == "completed" else "FAILED")
    except MlflowException as exc:
        raise ConfigError(f"MLflow refused the export: {redact(str(exc))[:300]}") from None
    return {"mlflow_run_id": mrun_id, "experiment": name, "existing": existing,
            "metrics": len(metrics), "artifacts": artifacts}
