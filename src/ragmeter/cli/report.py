"""``ragmeter report`` (one self-contained HTML file) and ``ragmeter serve`` (the local dashboard)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragmeter.cli._common import DB_HELP, console, err_console, get_store


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
    app.command("serve")(serve_cmd)


def _require(modules: tuple[str, ...], extra: str) -> None:
    """A clear error naming the pip command when an optional dependency is missing."""
    import importlib.util

    from ragmeter.errors import ConfigError

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"this command needs {', '.join(missing)}: pip install 'ragmeter-eval[{extra}]'")


def report_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes, names, 'latest'). "
                                                   "Two or more: a comparison, the first run as baseline.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")] = Path("report.html"),
    max_samples: Annotated[int, typer.Option(help="Rows of each per-sample table (worst first); 0 = all.")] = 1000,
    title: Annotated[str | None, typer.Option(help="Page title.")] = None,
    plotly: Annotated[str, typer.Option(
        "--plotly", help="inline (default: self-contained, opens offline), cdn (loads plotly.js from "
                         "cdn.plot.ly) or file (writes plotly-VERSION.min.js next to the report).")] = "inline",
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Write one self-contained HTML report (plots, aggregates with CIs, per-sample table); it
    opens in any browser with no network."""
    _require(("jinja2", "plotly"), "report")
    from ragmeter.report import write_report

    if max_samples < 0:
        raise typer.BadParameter("--max-samples must be >= 0")
    store = get_store(db)
    path = write_report(store, runs, output, max_samples=max_samples or None, title=title, plotly=plotly)
    size = path.stat().st_size / 1e6
    console.print(f"wrote {path} ({size:.1f} MB, {len(runs)} run{'s' if len(runs) != 1 else ''})")


def serve_cmd(
    host: Annotated[str, typer.Option(help="Interface to listen on. Keep 127.0.0.1 unless others "
                                           "must reach the dashboard (it has no login).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Serve the dashboard: runs, a run's report (live), comparisons, samples, and a JSON API
    (schema at /openapi.json). Read-only."""
    _require(("fastapi", "uvicorn", "jinja2", "plotly"), "server")
    import uvicorn

    from ragmeter.server import create_app

    if host not in {"127.0.0.1", "localhost", "::1"}:
        err_console.print(f"[yellow]warning:[/yellow] listening on {host}: anyone who can reach "
                          "this address can read every run in the store (no login).")
    app = create_app(get_store(db))
    console.print(f"ragmeter dashboard on http://{host}:{port}/ (Ctrl+C to stop)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
