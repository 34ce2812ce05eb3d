"""``ragmeter annotate ...``: annotation tasks for human raters (see docs/human.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ragmeter.apps.cli._common import DB_HELP, DEFAULT_PORT, console, fmt, get_store
from ragmeter.apps.cli._common import fail as _fail
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count

annotate_app = typer.Typer(no_args_is_help=True, help="Human annotation tasks: create, links, "
                           "status, CSV export/import, agreement, labels back into evaluation.")
#: where `ragmeter serve` listens by default (same port)
DEFAULT_BASE = f"http://127.0.0.1:{DEFAULT_PORT}"
Db = Annotated[str | None, typer.Option("--db", help=DB_HELP)]


def _links(tokens: dict[str, str], base: str) -> None:
    console.print("personal links (shown once; the store keeps only a hash — `ragmeter annotate "
                  "links TASK` makes new ones):", highlight=False)
    for rater, tok in tokens.items():
        console.print(f"  {rater}: {base.rstrip('/')}/annotate#{tok}", highlight=False, soft_wrap=True)


@annotate_app.command("create")
def create_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or prefix, name, 'latest').")],
    raters: Annotated[str, typer.Option("--raters", help="Comma-separated rater names.")],
    scales: Annotated[str, typer.Option("--scales", help="Comma-separated scales: NAME (1-5), "
                                        "NAME:1-3, NAME:binary, NAME:a|b|c (categorical).")] =
        "faithfulness,relevance,correctness,overall",
    n: Annotated[int, typer.Option("--n", help="Samples to annotate (all if the run has fewer).", parser=number(1, integer=True))] = 50,
    stratify: Annotated[str | None, typer.Option("--stratify", help="Metric of the run: sample "
                                                 "evenly across its quantile bins.")] = None,
    strata: Annotated[int, typer.Option("--strata", help="Bins for --stratify.", parser=number(1, 1000, integer=True))] = 4,
    rubric: Annotated[Path | None, typer.Option("--rubric", help="Text file with the rubric shown "
                                                "to raters (default: one line per scale).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="A name for the task.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of sampling and rater orders.", parser=number(0, integer=True))] = 0,
    base_url: Annotated[str, typer.Option("--base-url", help="Dashboard address for the links "
                                          "(`ragmeter serve`).")] = DEFAULT_BASE,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object with the task id and links.")] = False,
    db: Db = None,
) -> None:
    """Create an annotation task over a run's samples and print each rater's personal link."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.core.files import read_text
    from ragmeter.human.tasks import create_task, parse_scales

    text = read_text(rubric, "rubric") if rubric else None
    try:
        task_id, tokens = create_task(get_store(db), run, raters=raters.split(","),
                                      scales=parse_scales(scales), n=n, rubric=text,
                                      stratify=stratify, strata=strata, seed=seed, name=name)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    links = {r: f"{base_url.rstrip('/')}/annotate#{t}" for r, t in tokens.items()}
    if as_json:
        typer.echo(json.dumps({"task": task_id, "links": links, "tokens": tokens}))
        return
    console.print(f"task [bold]{task_id}[/bold] created; serve the dashboard with `ragmeter serve`")
    _links(tokens, base_url)


@annotate_app.command("list")
def list_cmd(run: Annotated[str | None, typer.Option("--run", help="Only tasks of this run.")] = None,
             db: Db = None) -> None:
    """List annotation tasks with their progress."""
    from rich.table import Table

    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import list_tasks, task_status

    store = get_store(db)
    try:
        rid = store.resolve_run(run) if run else None
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    t = Table()
    for c in ("task", "name", "run", "items", "scales", "progress (items done per rater)"):
        t.add_column(c)
    for task in list_tasks(store, rid):
        st = task_status(store, task.id)
        t.add_row(task.id, task.name or "", task.run_id, str(st["items"]), ",".join(st["scales"]),
                  ", ".join(f"{r} {v['done']}/{st['items']}" for r, v in st["raters"].items()))
    console.print(t)


@annotate_app.command("status")
def status_cmd(task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
               as_json: Annotated[bool, typer.Option("--json")] = False, db: Db = None) -> None:
    """A task's progress per rater."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import task_status

    try:
        st = task_status(get_store(db), task)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(st))
        return
    console.print(f"task {st['task']} (run {st['run_id']}, version {st['version']}): {st['items']} items, "
                  f"scales {', '.join(st['scales'])}", highlight=False)
    for r, v in st["raters"].items():
        console.print(f"  {r}: {v['done']}/{st['items']} items done ({v['labels']} labels)", highlight=False)


@annotate_app.command("links")
def links_cmd(task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
              raters: Annotated[str | None, typer.Option("--raters", help="Only these raters.")] = None,
              base_url: Annotated[str, typer.Option("--base-url")] = DEFAULT_BASE,
              db: Db = None) -> None:
    """Make new personal links (the old ones stop working; labels are kept)."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import rotate_tokens

    try:
        tokens = rotate_tokens(get_store(db), task, raters.split(",") if raters else None)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    _links(tokens, base_url)


@annotate_app.command("rubric")
def rubric_cmd(task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
               file: Annotated[Path | None, typer.Option("--file", help="New rubric text; without it the "
                                                         "current rubric is printed.")] = None,
               db: Db = None) -> None:
    """Print a task's rubric, or replace it (the task version goes up; labels record the version
    they were given under)."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import get_task, update_rubric

    try:
        store = get_store(db)
        if file is None:
            t = get_task(store, task)
            console.print(f"task {t.id}, version {t.version}:", highlight=False)
            console.print(t.rubric, markup=False, highlight=False)
            return
        from ragmeter.core.files import read_text

        version = update_rubric(store, task, read_text(file, "rubric"))
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    console.print(f"rubric updated; task version {version}")


@annotate_app.command("add-rater")
def add_rater_cmd(task: Annotated[str, typer.Argument(help="Task id, prefix or name.")], name: Annotated[str, typer.Argument(help="The new rater's name.")],
                  base_url: Annotated[str, typer.Option("--base-url")] = DEFAULT_BASE,
                  db: Db = None) -> None:
    """Add a rater to a task and print their link."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import add_rater

    try:
        tok = add_rater(get_store(db), task, name)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    _links({name: tok}, base_url)


@annotate_app.command("export")
def export_cmd(task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
               output: Annotated[Path, typer.Option("--output", "-o", help="CSV file to write.")],
               rater: Annotated[str | None, typer.Option("--rater", help="Only this rater.")] = None,
               with_labels: Annotated[bool, typer.Option("--labels", help="The stored labels instead of "
                                                         "a blank sheet to fill in.")] = False,
               db: Db = None) -> None:
    """Write a CSV for offline raters (item,rater,scale,label,question,answer), or the labels."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import export_csv

    try:
        text = export_csv(get_store(db), task, rater, blank=not with_labels)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    output.write_text(text, encoding="utf-8")
    console.print(f"wrote {output} ({text.count(chr(10)) - 1} rows)", highlight=False)


@annotate_app.command("import")
def import_cmd(task: Annotated[str, typer.Argument(help="Task id, prefix or name.")], file: Annotated[Path, typer.Argument(help="The filled-in CSV (item,rater,scale,label).")],
               rater: Annotated[str | None, typer.Option("--rater", help="Rater of the rows without "
                                                         "one (no rater column, or an empty cell); a row "
                                                         "naming another rater is an error.")] = None,
               db: Db = None) -> None:
    """Read labels from a CSV filled in offline (checked entirely before anything is stored)."""
    from ragmeter.core.counts import count
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import import_csv

    try:
        n = import_csv(get_store(db), task, file, rater)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    if n == 0:
        # the blank sheet imported back unfilled: nothing to store is not success
        raise _fail(f"{file}: no labels to store (every label cell is empty)", 3)
    console.print(f"stored {count(n, 'label')}")


@annotate_app.command("agreement")
def agreement_cmd(
    task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
    scale: Annotated[str | None, typer.Option("--scale", help="One scale (default: every scale).")] = None,
    level: Annotated[str, typer.Option("--level", help="Alpha's level (default ordinal for numeric "
                                       "scales, nominal for categorical).")] = "",
    bootstrap: Annotated[int, typer.Option("--bootstrap", parser=number(0, 1_000_000, integer=True))] = 1000,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    db: Db = None,
) -> None:
    """Inter-rater agreement of a task's labels per scale: Krippendorff's alpha, percent agreement,
    and Cohen's quadratic kappa when there are two raters."""
    from ragmeter.core.counts import count
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.reliability import task_agreement

    if level not in ("", "nominal", "ordinal", "interval", "ratio"):
        raise typer.BadParameter(f"use nominal, ordinal, interval or ratio, got {level!r}", param_hint="'--level'")
    store = get_store(db)
    try:
        out = task_agreement(store, task, [scale] if scale else None, level=level or None,
                             n_bootstrap=bootstrap)
    except (RagmeterError, ValueError, ImportError) as exc:
        raise _fail(str(exc)) from None
    if not out:
        raise _fail("no labels yet on " + (repr(scale) if scale else "any scale"), 3)
    undefined = any(r["value"] is None for rows in out.values() for r in rows)
    if as_json:
        typer.echo(json.dumps(out))
    else:
        for sc, rows in out.items():
            console.print(f"[bold]{sc}[/bold]")
            for r in rows:
                if r["value"] is None:
                    console.print(f"  {r['label']}: undefined — {r['undefined']}", highlight=False)
                else:
                    console.print(f"  {r['label']}: {r['value']:.3f} [{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}] "
                                  f"({count(r['n_items'], 'item')}) — {r['reading']}", highlight=False)
    if undefined:
        raise typer.Exit(3)  # as `ragmeter agreement`: an undefined coefficient is an incomplete answer


@annotate_app.command("labels")
def labels_cmd(
    task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
    scale: Annotated[str, typer.Option("--scale", help="The scale that becomes Sample.label.")] = "correctness",
    how: Annotated[str, typer.Option("--how", help="Combine raters: majority (ties -> lower value), "
                                     "mean or median.")] = "majority",
    threshold: Annotated[float | None, typer.Option("--threshold", help="Binarise: label 1 when the "
                                                    "[0,1]-normalised value >= this.", parser=number(0, 1))] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Dataset file (.jsonl/.csv/.parquet).")] =
        Path("labelled.jsonl"),
    db: Db = None,
) -> None:
    """Write the task's samples with `label` from the human labels (normalised to [0, 1]), a
    dataset for the correctness methods' calibration and accuracy reports."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.tasks import labelled_samples
    from ragmeter.io.writers import save

    try:
        samples = labelled_samples(get_store(db), task, scale, how, threshold)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    if not samples:
        raise _fail(f"no labels on {scale!r} yet", 3)
    path = save(samples, output)
    console.print(f"wrote {path}: {count(len(samples), 'sample')} with label = {how} of the raters' {scale}",
                  highlight=False)


@annotate_app.command("apply")
def apply_cmd(
    task: Annotated[str, typer.Argument(help="Task id, prefix or name.")],
    how: Annotated[str, typer.Option("--how", help="Combine raters: mean, majority or median.")] = "mean",
    db: Db = None,
) -> None:
    """Store the human labels as metrics of the task's run (`human_<scale>`, in [0, 1]), so
    `ragmeter show`, `compare`, `gate` and reports treat them like any metric."""
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.reliability import apply_human_scores

    try:
        done = apply_human_scores(get_store(db), task, how)
    except RagmeterError as exc:
        raise _fail(str(exc)) from None
    for metric, n in done.items():
        console.print(f"{metric}: {count(n, 'sample')}", highlight=False)
