"""`ragmeter batches`: the judge batches runs sent with ``--batch`` (pending first); cancel one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, get_store

batches_app = typer.Typer(help="List the judge batches of runs made with --batch (pending ones, or --all); "
                               "cancel one.", no_args_is_help=False)


def register(app: typer.Typer) -> None:
    app.add_typer(batches_app, name="batches")


def batch_options(batch: bool, fallback: str | None, no_wait: bool, prefix: str = "judge_") -> dict[str, Any]:
    """The judge's batch options of ``--batch``, ``--batch-fallback`` and ``--no-wait`` of a command
    other than ``eval`` (whose ``--no-wait`` also applies to a resumed run), keyed ``PREFIX + name``."""
    if fallback is not None and fallback not in {"none", "online"}:
        raise typer.BadParameter(f"use none or online, got {fallback!r}", param_hint="'--batch-fallback'")
    if (fallback is not None or no_wait) and not batch:
        raise typer.BadParameter("--batch-fallback and --no-wait need --batch", param_hint="'--batch'")
    out: dict[str, Any] = {f"{prefix}batch": True, f"{prefix}batch_wait": not no_wait} if batch else {}
    if fallback is not None:
        out[f"{prefix}batch_fallback"] = fallback
    return out


def _rows(db: str | None, everything: bool) -> list[dict[str, object]]:
    from ragmeter.llm.batch import OPEN, stored_batches

    recs = stored_batches(get_store(db, must_exist=True))
    rows = [{"batch": k, "provider_id": r.get("provider_id"), "run": r.get("run_id"), "judge": r.get("judge"),
             "state": r.get("state"), "status": r.get("status"), "requests": len(r.get("keys") or ()),
             "stored_at": datetime.fromtimestamp(float(r.get("stored_at") or 0), UTC).isoformat(timespec="seconds")}
            for k, r in recs.items() if everything or r.get("state") in OPEN]
    return sorted(rows, key=lambda r: str(r["stored_at"]), reverse=True)


@batches_app.callback(invoke_without_command=True)
def batches_cmd(
    ctx: typer.Context,
    everything: Annotated[bool, typer.Option("--all", help="Collected and cancelled batches too.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON list, newest first.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """List the judge batches not yet collected, with their runs (`ragmeter eval --resume RUN` collects one)."""
    ctx.obj = {"db": db}
    if ctx.invoked_subcommand is not None:
        return
    rows = _rows(db, everything)
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        console.print("no pending judge batches" if not everything else "no judge batches stored")
        return
    from rich import box
    from rich.table import Table

    t = Table(title=f"{len(rows)} judge batches (state: ragmeter's, the provider's in brackets; stored: UTC month-day time)", box=box.SIMPLE_HEAD, show_edge=False, title_justify="left")
    for col in ("batch", "provider id", "run", "state", "requests", "stored"):
        t.add_column(col, no_wrap=col != "state", overflow="fold",
                     min_width=max((len(str(r["state"])) for r in rows), default=5) if col == "state" else None)
    for r in rows:
        state = f"{r['state']} ({r['status']})" if r["status"] else str(r["state"])
        t.add_row(str(r["batch"]), str(r["provider_id"] or "—"), str(r["run"] or "—"), state, str(r["requests"]),
                  str(r["stored_at"])[5:16].replace("T", " "))
    console.print(t)
    console.print("collect one: ragmeter eval --resume RUN; a batch without a run (golden generate) or of "
                  "meta-eval: run its command again", markup=False, highlight=False)


@batches_app.command("cancel")
def cancel_cmd(
    ctx: typer.Context,
    batch: Annotated[str, typer.Argument(help="The batch (ragmeter's id or the provider's, from `ragmeter batches`).")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Cancel a judge batch at its provider; a later `ragmeter eval --resume RUN` of its run sends a new one."""
    from ragmeter.llm.batch import stored_batches
    from ragmeter.llm.config import JudgeConfigError, config_from_options

    db = db or (ctx.obj or {}).get("db")
    store = get_store(db, must_exist=True)
    rec = next((r for k, r in stored_batches(store).items() if batch in {k, r.get("provider_id")}), None)
    if rec is None:
        raise JudgeConfigError(f"no stored batch {batch!r}: `ragmeter batches --all` lists them")
    run = store.get_run(rec["run_id"]) if rec.get("run_id") else None
    options = dict((run.config or {}).get("options", {})) if run is not None else {"judge": rec.get("judge")}
    from ragmeter.llm.batch import cancel_batch

    out = cancel_batch(store, batch, config_from_options(options))
    console.print(f"batch {out['batch']} ({out.get('provider_id') or 'never submitted'}) cancelled",
                  markup=False, highlight=False)
