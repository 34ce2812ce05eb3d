"""`ragmeter runs`: list stored runs, and delete, rename or tag one."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ragmeter.apps.cli._common import DB_HELP, console, get_store
from ragmeter.apps.cli._params import confirm, number
from ragmeter.core.counts import count
from ragmeter.core.terminal import PathCell, path_width

runs_app = typer.Typer(help="List stored runs (newest first); delete, rename or tag one.",
                       no_args_is_help=False)

RUN_HELP = "Run id (or unique id prefix, name, 'latest')."


@runs_app.callback(invoke_without_command=True)
def runs_cmd(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="Show at most this many.", parser=number(1, 1_000_000_000, integer=True))] = 50,
    tag: Annotated[str | None, typer.Option("--tag", help="Only runs carrying this tag.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON list, newest first.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """List stored runs, newest first (full ids, never cut)."""
    ctx.obj = {"db": db}
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    runs = get_store(db, must_exist=True).list_runs(limit, tag=tag)
    if as_json:
        typer.echo(json.dumps([{"id": r.id, "name": r.name, "status": r.status,
                                "created_at": r.created_at.isoformat(), "tags": r.tags or [],
                                "metrics": [m["key"] for m in r.metrics],
                                "n_samples": r.n_samples, "dataset": r.dataset_source} for r in runs]))
        return
    from rich import box

    # the id is what a user types next (show, report, gate ...): it never wraps or shrinks;
    # the free-text columns wrap instead
    t = Table(title=f"{count(len(runs), 'run')} (n = samples; created month-day time)", box=box.SIMPLE_HEAD,
              show_edge=False, pad_edge=False, collapse_padding=True, title_justify="left")
    t.add_column("id", no_wrap=True, min_width=max((len(r.id) for r in runs), default=2))
    named = any(r.name for r in runs)
    tagged = any(r.tags for r in runs)
    if named:
        t.add_column("name", overflow="fold")
    t.add_column("status", no_wrap=True)
    t.add_column("created", no_wrap=True)
    t.add_column("n", justify="right", no_wrap=True)
    if tagged:
        t.add_column("tags", overflow="fold")
    t.add_column("metrics", no_wrap=True)  # one key and a count below 110 columns
    width = console.size.width
    shown = 3 if width >= 110 else 1  # narrow terminals: the first metric and a count
    rows = []
    for r in runs:
        keys = [m["key"] for m in r.metrics]
        more = f" +{len(keys) - shown}" if len(keys) > shown else ""
        rows.append((r.id, *([r.name or ""] if named else []), r.status, r.created_at.strftime("%m-%d %H:%M"),
                     str(r.n_samples), *([", ".join(r.tags or [])] if tagged else []),
                     ", ".join(keys[:shown]) + more))
    # a path: shortened from the left, never wrapped mid-name ("rows-20" / "0000.jsonl"); it takes
    # the room the one-line columns leave, shared evenly with a name and a tags column that wrap
    paths = [r.dataset_source for r in runs if r.dataset_source]
    for i, c in enumerate(t.columns):  # a count, a date, a status: never cut ("2000…" for 200000)
        if c.no_wrap:
            c.min_width = max([len(str(c.header)), *(len(row[i]) for row in rows)])
    t.add_column("dataset")
    for row, r in zip(rows, runs, strict=True):
        t.add_row(*row, PathCell(r.dataset_source) if r.dataset_source else "")
    # what the one-line columns and the gaps between columns take, as rich lays them out: measured
    # with every wrapping column (name, tags, dataset) one character wide
    wrapping = [c for c in t.columns if not c.no_wrap]
    for c in wrapping:
        c.width = 1
    fixed = console.measure(t).maximum - len(wrapping)
    for c in wrapping:
        c.width = None
    room = max(12, (width - fixed) // len(wrapping))
    t.columns[-1].width = path_width(paths, cap=room) if paths else None
    console.print(t)


def _db(ctx: typer.Context, db: str | None) -> str | None:
    return db or (ctx.obj or {}).get("db")


@runs_app.command("delete")
def delete_cmd(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Delete a run with its samples and scores. The embedding and judge caches are kept."""
    store = get_store(_db(ctx, db), must_exist=True)
    r = store.get_run(run)
    if not yes and not confirm(f"delete run {r.id} ({r.name or 'no name'}, {count(r.n_samples, 'sample')})?"):
        console.print("nothing deleted")
        raise typer.Exit(1)
    store.delete_run(r.id)
    console.print(f"deleted run {r.id}")


@runs_app.command("rename")
def rename_cmd(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    name: Annotated[str, typer.Argument(help="The new name ('' removes it).")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Give a run a new name."""
    rid = get_store(_db(ctx, db), must_exist=True).rename_run(run, name or None)
    console.print(f"run {rid} is now named {name!r}" if name else f"run {rid} has no name now")


@runs_app.command("tag")
def tag_cmd(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    tags: Annotated[list[str] | None, typer.Argument(help="Tags to add.")] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", "-r", help="A tag to remove (repeatable).")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Add tags to a run (and remove some with --remove); `ragmeter runs --tag T` lists them."""
    store = get_store(_db(ctx, db), must_exist=True)
    rid = store.resolve_run(run)
    now = store.tag_run(rid, add=tags or [], remove=remove or [])
    console.print(f"run {rid} tags: {', '.join(now) if now else '(none)'}")
