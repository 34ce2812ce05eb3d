"""``ragmeter report`` (one self-contained HTML file) and ``ragmeter serve`` (the local dashboard)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragmeter.apps.cli._common import DB_HELP, DEFAULT_PORT, console, err_console, get_store
from ragmeter.apps.cli._outputs import check_output_name
from ragmeter.apps.cli._params import number


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
    app.command("serve")(serve_cmd)


def _require(modules: tuple[str, ...], extra: str) -> None:
    """A clear error naming the pip command when an optional dependency is missing."""
    import importlib.util

    from ragmeter.core.errors import ConfigError

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"this command needs {', '.join(missing)}: pip install 'ragmeter-eval[{extra}]'")


def report_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes, names, 'latest'). "
                                                   "Two or more: a comparison, the first run as baseline.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")] = Path("report.html"),
    max_samples: Annotated[int, typer.Option(help="Rows of each per-sample table (worst first); 0 = all, "
                                                  "capped at 20,000 with a warning unless --all-rows.", parser=number(0, integer=True))] = 1000,
    all_rows: Annotated[bool, typer.Option("--all-rows", help="With --max-samples 0: really every row, "
                                                              "however large the file gets.")] = False,
    title: Annotated[str | None, typer.Option(help="Page title.")] = None,
    plotly: Annotated[str, typer.Option(
        "--plotly", help="inline (default: self-contained, opens offline), cdn (loads plotly.js from "
                         "cdn.plot.ly) or file (writes plotly-VERSION.min.js next to the report).")] = "inline",
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Write one self-contained HTML report (plots, aggregates with CIs, per-sample table); it
    opens in any browser with no network."""
    _require(("jinja2", "plotly"), "report")
    from ragmeter.apps.report import write_report

    if max_samples < 0:
        raise typer.BadParameter("--max-samples must be >= 0")
    check_output_name(output, "HTML", (".html", ".htm"), "--output",
                      "a browser prints it to PDF" if output.suffix.lower() == ".pdf" else "")
    from ragmeter.apps.report.render import MAX_ALL_ROWS

    store = get_store(db, must_exist=True)
    limit: int | None = max_samples or None
    if limit is None and not all_rows:
        largest = max(store.get_run(r).n_samples for r in runs)
        if largest > MAX_ALL_ROWS:
            err_console.print(f"[yellow]warning:[/yellow] a run has {largest:,} samples: the tables "
                              f"show the {MAX_ALL_ROWS:,} worst of each (a page with every row would be "
                              "too large for a browser to open); --all-rows writes them all.")
            limit = MAX_ALL_ROWS
    path = write_report(store, runs, output, max_samples=limit, title=title, plotly=plotly)
    size = path.stat().st_size / 1e6
    console.print(f"wrote {path} ({size:.1f} MB, {len(runs)} run{'s' if len(runs) != 1 else ''})")


def serve_cmd(
    host: Annotated[str, typer.Option(help="Interface to listen on. Keep 127.0.0.1 unless others "
                                           "must reach the dashboard (it has no login).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", parser=number(0, 65_535, integer=True))] = DEFAULT_PORT,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    allow_host: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="Another name clients may use in the Host header (repeatable). "
                             "127.0.0.1, localhost, ::1 and --host are always allowed; any other "
                             "Host gets 400, which stops web pages reading the dashboard through "
                             "DNS rebinding.")] = None,
) -> None:
    """Serve the dashboard: runs, a run's report (live), comparisons, samples, and a JSON API
    (schema at /openapi.json). Read-only."""
    _require(("fastapi", "uvicorn", "jinja2", "plotly"), "server")
    if host not in {"127.0.0.1", "localhost", "::1"}:
        err_console.print(f"[yellow]warning:[/yellow] listening on {host}: anyone who can reach "
                          "this address can read every run in the store (no login). Requests must "
                          f"name {host}, localhost or a --allow-host name in their Host header.")
    from ragmeter.apps.server.listen import listen

    # listen before the imports and the app (half a second): a browser opened with the command is
    # connected at once and answered when the app is ready, not refused
    sockets = listen(host, port)
    import threading

    import uvicorn

    from ragmeter.apps.cli import runtime
    from ragmeter.apps.report.paged import first_page_answered, warm
    from ragmeter.apps.server import create_app

    store = get_store(db)
    app = create_app(store, allowed_hosts=[host, *(allow_host or [])], defer_api=True)
    # the collector paused for the start (`ragmeter serve`: apps/cli/runtime.py) runs again once
    # the first page is answered
    threading.Thread(target=lambda: (first_page_answered(runtime.START_PAUSE_S), runtime.server_started()),
                     daemon=True, name="ragmeter-collector").start()
    # build the newest runs' cached views in the background, so their first page is fast; a first
    # request in the first second (a browser opened with the command) is answered before that
    threading.Thread(target=warm, args=(store,), kwargs={"wait_s": 1.0}, daemon=True,
                     name="ragmeter-warm").start()
    bound = sockets[0].getsockname()[1]  # the port the system chose for --port 0
    shown = f"[{host}]" if ":" in host else host
    console.print(f"ragmeter dashboard on http://{shown}:{bound}/ (Ctrl+C to stop)")
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run(sockets=sockets)
    except SystemExit as exc:
        if exc.code != 3:  # uvicorn's "startup failed"
            raise
        from ragmeter.core.errors import ConfigError

        raise ConfigError(f"cannot listen on {host}:{port} (the reason is printed above)") from None
