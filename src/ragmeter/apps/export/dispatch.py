"""``ragmeter export RUN --to SINK``: pick the sink, check its options, say what was sent."""

from __future__ import annotations

from ragmeter.apps.export import SINKS
from ragmeter.core.errors import ConfigError
from ragmeter.store import Store


def export_to(store: Store, run_id: str, to: str, *, experiment: str | None = None,
              spreadsheet: str | None = None) -> str:
    """Send a stored run to a sink and return a one-line account of it.

    Args:
        store: the results store.
        run_id: the run's full id.
        to: ``mlflow`` or ``sheets``.
        experiment: MLflow experiment name (``mlflow`` only).
        spreadsheet: Google spreadsheet id (``sheets``, required).

    Raises:
        ConfigError: unknown sink, or an option the sink needs is missing.
    """
    if to == "sheets":
        if not spreadsheet:
            raise ConfigError("--to sheets needs --spreadsheet ID (the part of the sheet's URL after /d/)")
        from ragmeter.apps.export.sheets import export_sheets

        counts = export_sheets(store, run_id, spreadsheet)
        return "appended " + ", ".join(f"{n} rows to {w}" for w, n in counts.items())
    if to == "mlflow":
        from ragmeter.apps.export.mlflow import export_mlflow

        out = export_mlflow(store, run_id, experiment=experiment)
        verb = "updated" if out["existing"] else "created"
        return f"{verb} MLflow run {out['mlflow_run_id']} in experiment {out['experiment']!r}"
    raise ConfigError(f"unknown sink {to!r}: use one of {', '.join(SINKS)}")
