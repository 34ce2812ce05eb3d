"""Human evaluation commands: ``agreement`` (inter-rater agreement of a CSV of ratings) and
``annotate`` (annotation tasks: create, links, export/import CSV, status, labels)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, fmt
from ragmeter.apps.cli._common import fail as _fail
from ragmeter.apps.cli._params import number


def register(app: typer.Typer) -> None:
    app.command("agreement")(agreement_cmd)
    from ragmeter.apps.cli.annotate import annotate_app

    app.add_typer(annotate_app, name="annotate")
    app.command("reliability")(reliability_cmd)
    from ragmeter.apps.cli import show_hooks

    show_hooks.add(_reliability_section)


def _reliability_section(store: Any, run: Any) -> dict[str, Any]:
    from ragmeter.human.reliability import show_sections

    return show_sections(store, run)


def agreement_cmd(
    file: Annotated[Path, typer.Argument(help="CSV of ratings: long (item,rater,label) or wide "
                                              "(item, then one column per rater).")],
    method: Annotated[str, typer.Option("--method", "-m", help="alpha (Krippendorff), kappa (Cohen, two "
                                        "raters), fleiss, percent, or all.")] = "alpha",
    level: Annotated[str, typer.Option("--level", help="Level of measurement for alpha: nominal, "
                                       "ordinal, interval, ratio.")] = "nominal",
    weights: Annotated[str, typer.Option("--weights", help="Cohen's kappa weights: none, linear, "
                                         "quadratic.")] = "none",
    raters: Annotated[str | None, typer.Option("--raters", help="Comma-separated raters to use "
                                               "(kappa: exactly two).")] = None,
    categories: Annotated[str | None, typer.Option("--value-domain", "--categories", help="The labels in "
                                                   "order, comma-separated (krippendorff's value_domain): "
                                                   "text labels on an ordinal or interval scale, e.g. "
                                                   "'very low,low,mid,high,very high'. Every label of the "
                                                   "file must be one of them.")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over items for "
                                           "the interval (0: none).", parser=number(0, 1_000_000, integer=True))] = 1000,
    confidence: Annotated[float, typer.Option("--confidence", help="Interval level.", parser=number(0, 1, low_open=True, high_open=True))] = 0.95,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the resampling.", parser=number(0, integer=True))] = 0,
    minimum: Annotated[float | None, typer.Option("--min", help="Exit 1 when the coefficient is "
                                                  "below this (with --method all: a chance-corrected one).", parser=number(-1, 1))] = None,
    item_column: Annotated[str | None, typer.Option("--item-column", help="Long layout: the item "
                                                    "column, when not item/unit/sample_id/id.")] = None,
    rater_column: Annotated[str | None, typer.Option("--rater-column", help="Long layout: the rater "
                                                     "column, when not rater/coder/annotator/judge.")] = None,
    label_column: Annotated[str | None, typer.Option("--label-column", help="Long layout: the label "
                                                     "column, when not label/value/score/rating (a "
                                                     "Label Studio CSV names it after the control, "
                                                     "e.g. sentiment).")] = None,
    scale: Annotated[str | None, typer.Option("--scale", help="With a scale column (`annotate export "
                                              "--labels`): the scale to read.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object (a list for --method all).")] = False,
) -> None:
    """Inter-rater agreement of a CSV of ratings, with a bootstrap interval over items.

    Krippendorff's alpha handles any number of raters, missing ratings and the four levels of
    measurement; Cohen's kappa compares two raters (weighted for ordinal scales); Fleiss' kappa
    many raters who each rated every item. An undefined coefficient (one category only) is said
    so (exit 3), never printed as 0.
    """
    from ragmeter.core.counts import count
    from ragmeter.core.errors import RagmeterError
    from ragmeter.stats.agreement import agreement, interpret, read_ratings

    methods = ["alpha", "kappa", "fleiss", "percent"] if method == "all" else [method]
    if any(m not in ("alpha", "kappa", "fleiss", "percent") for m in methods):
        raise _fail(f"unknown --method {method!r}: alpha, kappa, fleiss, percent or all")
    w = None if weights in ("none", "", "unweighted") else weights
    try:
        ratings = read_ratings(file, order=[c.strip() for c in categories.split(",")] if categories else None,
                               item_column=item_column, rater_column=rater_column, label_column=label_column,
                               scale=scale)
        sel = [x.strip() for x in raters.split(",")] if raters else None
        if method == "all" and sel is None and len(ratings.raters) != 2:
            methods.remove("kappa")
        results = [agreement(ratings, m, level=level, weights=w, raters=sel, n_bootstrap=bootstrap,
                             confidence=confidence, seed=seed) for m in methods]
    except (ValueError, ImportError, RagmeterError) as exc:  # RagmeterError: the file cannot be read
        raise _fail(str(exc)) from None
    if as_json:
        out = [r.to_dict() for r in results]
        typer.echo(json.dumps(out if method == "all" else out[0]))
    else:
        console.print(f"{file}: {count(len(ratings.items), 'item')}, {count(len(ratings.raters), 'rater')} "
                      f"({', '.join(ratings.raters)}), categories {', '.join(f'{c:g}' if isinstance(c, float) else str(c) for c in ratings.categories[:12])}",
                      highlight=False)
        pct = int(round(confidence * 100))
        for r in results:
            if r.value is None:
                console.print(f"{r.label}: undefined — {r.undefined}", highlight=False)
            else:
                ci = (f"{pct}% CI [{fmt(r.ci_low, 3)}, {fmt(r.ci_high, 3)}]" if r.ci_low is not None
                      else "no interval")
                console.print(f"{r.label}: {r.value:.3f}  {ci}  ({count(r.n_items, 'item')}, "
                              f"{count(r.n_bootstrap, 'bootstrap resample')} over items) — "
                              f"{interpret(r.value, r.method)}", highlight=False)
            for note in r.notes:
                console.print(f"  note: {note}", highlight=False)
    if any(r.value is None for r in results):
        raise typer.Exit(3)
    # with --method all the check is on the chance-corrected coefficients; asked for alone, percent
    # agreement is checked too (it was skipped, so `--method percent --min` could never fail)
    if minimum is not None and any(r.value < minimum for r in results if r.method != "percent" or method == "percent"):
        if not as_json:
            console.print(f"below --min {minimum}")
        raise typer.Exit(1)


def reliability_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or prefix, name, 'latest') with judge metrics.")] = "latest",
    metric: Annotated[str | None, typer.Option("--metric", help="One judge metric (default: all).")] = None,
    task: Annotated[str | None, typer.Option("--task", help="Annotation task with the human labels "
                                             "(default: the run's tasks).")] = None,
    repeats: Annotated[str | None, typer.Option("--repeats", help="Comma-separated runs repeating the "
                                                "same judge (temperature > 0, cache off): self-consistency.")] = None,
    other_judge: Annotated[str | None, typer.Option("--other-judge", help="A run of the same metrics "
                                                    "with another judge model.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object {metric: card}.")] = False,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
) -> None:
    """Judge reliability card of each judge metric of a run: agreement with human labels against
    the humans' own agreement, Spearman, mean absolute error, confusion matrix, self-consistency
    over repeated runs, agreement with a second judge, share of judge failures. --repeats and
    --other-judge are remembered for `ragmeter show` and the report."""
    from ragmeter.apps.cli._common import get_store
    from ragmeter.core.errors import RagmeterError
    from ragmeter.human.reliability import (
        KV_NAMESPACE,
        _judge_metrics,
        card_lines,
        reliability_card,
    )

    store = get_store(db)
    try:
        r = store.get_run(run)
        metrics = [metric] if metric else _judge_metrics(r)
        if not metrics:
            raise _fail(f"run {r.id} has no judge metric", 2)
        rep = [x.strip() for x in repeats.split(",") if x.strip()] if repeats else None
        if rep or other_judge:
            rec = store.kv_get(KV_NAMESPACE, r.id) or {}
            for m in metrics:
                entry = dict(rec.get(m) or {})
                if rep:
                    entry["repeats"] = [store.resolve_run(x) for x in rep]
                if other_judge:
                    entry["other_judge"] = store.resolve_run(other_judge)
                rec[m] = entry
            store.kv_put(KV_NAMESPACE, r.id, rec)
        cards = {m: reliability_card(store, r.id, m, task=task) for m in metrics}
    except (RagmeterError, ValueError, ImportError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(cards, default=str))
        return
    for m, card in cards.items():
        console.print(f"[bold]judge reliability: {m}[/bold]")
        for line in card_lines(card):
            console.print(line, highlight=False, markup=False)
    if any(not (c["human"] or c["self_consistency"] or c["cross_judge"]) for c in cards.values()):
        raise typer.Exit(3)
